#!/usr/bin/env bash
# Checks that docker/'s Containerfiles and compose.yaml agree with the webtune they package,
# without building or running any container (CI has no podman):
#  1. every `webtune SUB [SUBSUB] --flag ...` they run or show (exec-form arrays, shell lines and
#     their comments, `\` continuations and arrays spread over lines joined) names a subcommand and flags that
#     `webtune SUB [SUBSUB] --help` lists;
#  2. every compose service's image is localhost/webtune/NAME with a docker/NAME/Containerfile,
#     and every Containerfile is FROM an image this folder makes (the base or webtune/runtime);
#  3. with python3's yaml module (when present): compose.yaml parses, its services are
#     tracker, native-agent, browser-farm and tune, every depends_on and named volume exists.
# Usage: tests/docker_files_check.sh WEBTUNE_BINARY DOCKER_DIR
set -euo pipefail

webtune=$1
dir=$2
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

files=("$dir"/*/Containerfile "$dir/compose.yaml")
for f in "${files[@]}"; do [[ -f "$f" ]] || fail "missing $f"; done

# 1. Logical lines (a trailing `\` joins the next; a leading `#` is dropped so that the usage
# shown in comments is checked too), tokenised on blanks, quotes, brackets and commas.
checked=0
declare -A help_cache
help_of() {  # $1: "SUB" or "SUB SUBSUB"; prints the help text, fails when there is none
  if [[ -z "${help_cache[$1]+x}" ]]; then
    # shellcheck disable=SC2086
    help_cache[$1]=$("$webtune" $1 --help 2>&1) || return 1
  fi
  printf '%s\n' "${help_cache[$1]}"
}
while IFS=$'\t' read -r file line; do
  read -r -a tokens <<<"$(tr -s '[]",'"'"'`' '      ' <<<"$line")"
  for ((i = 0; i < ${#tokens[@]}; i++)); do
    [[ "${tokens[i]}" == webtune || "${tokens[i]}" == */webtune ]] || continue
    sub=${tokens[i + 1]:-}
    [[ -n "$sub" && "$sub" != -* ]] || continue
    if ! help_of "$sub" >/dev/null; then
      fail "$file: 'webtune $sub' is not a webtune subcommand: $line"
      continue
    fi
    cmd=$sub
    next=${tokens[i + 2]:-}
    # A sub-subcommand (tracker status, log best) is one that SUB's help lists.
    if [[ -n "$next" && "$next" != -* ]] &&
      help_of "$sub" | sed -n '/^Subcommands:/,$p' | grep -qE "^  $next( |$)"; then
      cmd="$sub $next"
    fi
    text=$(help_of "$cmd")
    for ((j = i + 2; j < ${#tokens[@]}; j++)); do
      t=${tokens[j]}
      [[ "$t" == webtune || "$t" == */webtune ]] && break  # the next invocation on this line
      [[ "$t" == --* ]] || continue
      flag=${t%%=*}
      grep -qE "(^|[ ,])$flag([ =]|$)" <<<"$text" || fail "$file: 'webtune $cmd' has no $flag: $line"
      checked=$((checked + 1))
    done
  done
done < <(awk '
  FNR == 1 { acc = ""; depth = 0 }
  {
    l = $0
    sub(/^[ \t]*#[ \t]?/, "", l)
    if (l ~ /\\[ \t]*$/) { sub(/\\[ \t]*$/, " ", l); acc = acc l; next }
    # A YAML / JSON array spread over lines is one line until its brackets close.
    depth += gsub(/\[/, "[", l) - gsub(/\]/, "]", l)
    if (depth > 0) { acc = acc l " "; next }
    print FILENAME "\t" acc l
    acc = ""
    depth = 0
  }' "${files[@]}")
((checked > 0)) || fail "no webtune flag found to check (did the extraction break?)"
echo "checked $checked webtune flags in ${#files[@]} files"

# 2. Images and bases.
while read -r image; do
  name=${image#localhost/webtune/}
  [[ "$image" == localhost/webtune/* && -f "$dir/$name/Containerfile" ]] ||
    fail "compose.yaml: image $image is not one of docker/*/Containerfile's"
done < <(sed -n 's/^[[:space:]]*image:[[:space:]]*//p' "$dir/compose.yaml")
for f in "$dir"/*/Containerfile; do
  from=$(sed -n 's/^FROM[[:space:]]*//p' "$f")
  # shellcheck disable=SC2016 # the literal ARG references, not expansions here
  case "$from" in
    '${BASE}' | '${RUNTIME}') ;;
    *) fail "$f: FROM $from is not the local base (ARG BASE) or runtime (ARG RUNTIME)" ;;
  esac
  grep -qE '^ARG (BASE=webtune/bookworm-base|RUNTIME=webtune/runtime)$' "$f" ||
    fail "$f: its ARG default is not webtune/bookworm-base or webtune/runtime"
done

# 3. The compose file's structure, where python3 can parse YAML.
if python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$dir/compose.yaml" <<'PY' || fail "compose.yaml: structure (above)"
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
services = doc["services"]
bad = []
want = {"tracker", "native-agent", "browser-farm", "tune"}
if set(services) != want:
    bad.append(f"services are {sorted(services)}, not {sorted(want)}")
volumes = set((doc.get("volumes") or {}).keys())
for name, s in services.items():
    for dep in s.get("depends_on", []):
        if dep not in services:
            bad.append(f"{name} depends on unknown service {dep}")
    for v in s.get("volumes", []):
        src = v.split(":")[0]
        if not src.startswith((".", "/")) and src not in volumes:
            bad.append(f"{name} mounts undeclared volume {src}")
    if not (s.get("command") or s.get("entrypoint")):
        bad.append(f"{name} has no command")
for b in bad:
    print("compose.yaml:", b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
  echo "compose.yaml parses (python3 yaml)"
else
  echo "compose.yaml: YAML structure not checked (python3 has no yaml module)"
fi

((failures == 0)) || { echo "$failures failure(s)" >&2; exit 1; }
echo "docker files consistent"
