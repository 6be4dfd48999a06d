// SPDX-License-Identifier: Apache-2.0
// All-or-nothing collectives: a local phase's outcome is shared with every rank so that one
// rank's failure fails every rank (with the same exception type, naming the rank) instead of
// leaving the others waiting in the next collective.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "tessera/transport/transport.hpp"

namespace tessera::dist::detail {

/// Which Tessera exception a rank threw, carried between ranks so peers throw the same type.
enum class ErrorKind : uint8_t { kNone = 0, kValue, kIndex, kType, kIO, kOther };

/// The kind and message of `err` (kNone / "" for a null pointer).
ErrorKind error_kind(const std::exception_ptr& err, std::string* message);
/// Throws the exception of kind `k` (kOther: tessera::Error) with `message`.
[[noreturn]] void throw_error_kind(ErrorKind k, const std::string& message);

/// One rank's outcome of a local phase as its peers receive it: the ErrorKind byte, then
/// `payload` when `err` is null, else the error's message.
transport::Bytes outcome_message(const std::exception_ptr& err,
                                 const transport::Bytes& payload = {});
/// The payload of rank `rank`'s outcome message `m`; when that rank failed, throws its
/// exception type with "<context>: rank <rank> failed: <its message>".
transport::Bytes payload_of(const transport::Bytes& m, const std::string& context, int rank);

/// Collective: all-gathers every rank's outcome of a local phase (`err` null when it succeeded,
/// with `payload` as its result). When every rank succeeded, returns each rank's payload. Else
/// every rank throws: the failing rank rethrows `err`; the others throw the lowest failing
/// rank's exception type with "<context>: rank r failed: <its message>". Transport errors are
/// rethrown with `context`.
std::vector<transport::Bytes> all_or_nothing(transport::Transport& t, const std::string& context,
                                             const std::exception_ptr& err,
                                             const transport::Bytes& payload = {});

}  // namespace tessera::dist::detail
