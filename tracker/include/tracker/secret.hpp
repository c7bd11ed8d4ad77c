/// \file secret.hpp
/// Handling of access tokens: comparison that does not leak through timing, and logs that do not
/// leak them.
#pragma once

#include <string>
#include <string_view>

namespace webtune::tracker {

/// True when `given` equals `expected`. Both are hashed with SHA-256 (OpenSSL) and the digests
/// compared with CRYPTO_memcmp, so the time taken depends neither on where they first differ nor
/// on their lengths.
bool token_equals(std::string_view given, std::string_view expected);

/// `text` (a request target or URL) with the value of every `token=` query parameter replaced by
/// `***`, for logs: a failed request must not write a secret into a log file.
std::string redact_secrets(std::string_view text);

}  // namespace webtune::tracker
