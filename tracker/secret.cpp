/// \file secret.cpp
/// Constant-time token comparison (OpenSSL) and token redaction for logs.
#include "tracker/secret.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>

namespace webtune::tracker {

namespace {

std::array<unsigned char, EVP_MAX_MD_SIZE> digest(std::string_view text, unsigned* length) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> out{};
  if (EVP_Digest(text.data(), text.size(), out.data(), length, EVP_sha256(), nullptr) != 1)
    *length = 0;
  return out;
}

}  // namespace

bool token_equals(std::string_view given, std::string_view expected) {
  unsigned a_len = 0, b_len = 0;
  const auto a = digest(given, &a_len);
  const auto b = digest(expected, &b_len);
  if (a_len == 0 || a_len != b_len) return false;  // OpenSSL failed: never grant access
  return CRYPTO_memcmp(a.data(), b.data(), a_len) == 0;
}

std::string redact_secrets(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    // A parameter starts the string, or follows '?' or '&'.
    const bool at_param = i == 0 || text[i - 1] == '?' || text[i - 1] == '&';
    if (at_param && text.compare(i, 6, "token=") == 0) {
      out += "token=***";
      i += 6;
      while (i < text.size() && text[i] != '&' && text[i] != '#') ++i;
      continue;
    }
    out += text[i++];
  }
  return out;
}

}  // namespace webtune::tracker
