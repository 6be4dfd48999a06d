// SPDX-License-Identifier: Apache-2.0
#include "agree.hpp"

#include <cstring>

#include "state.hpp"
#include "tessera/core/error.hpp"

namespace tessera::dist::detail {

ErrorKind error_kind(const std::exception_ptr& err, std::string* message) {
  message->clear();
  if (!err) {
    return ErrorKind::kNone;
  }
  try {
    std::rethrow_exception(err);
  } catch (const IndexError& e) {
    *message = e.what();
    return ErrorKind::kIndex;
  } catch (const TypeError& e) {
    *message = e.what();
    return ErrorKind::kType;
  } catch (const ValueError& e) {
    *message = e.what();
    return ErrorKind::kValue;
  } catch (const IOError& e) {
    *message = e.what();
    return ErrorKind::kIO;
  } catch (const std::exception& e) {
    *message = e.what();
    return ErrorKind::kOther;
  } catch (...) {
    *message = "non-standard exception";
    return ErrorKind::kOther;
  }
}

void throw_error_kind(ErrorKind k, const std::string& message) {
  switch (k) {
    case ErrorKind::kValue:
      throw ValueError(message);
    case ErrorKind::kIndex:
      throw IndexError(message);
    case ErrorKind::kType:
      throw TypeError(message);
    case ErrorKind::kIO:
      throw IOError(message);
    default:
      throw Error(message);
  }
}

transport::Bytes outcome_message(const std::exception_ptr& err, const transport::Bytes& payload) {
  std::string msg;
  const ErrorKind kind = error_kind(err, &msg);
  transport::Bytes m;
  m.reserve(1 + (kind == ErrorKind::kNone ? payload.size() : msg.size()));
  m.push_back(static_cast<uint8_t>(kind));
  if (kind == ErrorKind::kNone) {
    m.insert(m.end(), payload.begin(), payload.end());
  } else {
    m.insert(m.end(), msg.begin(), msg.end());
  }
  return m;
}

transport::Bytes payload_of(const transport::Bytes& m, const std::string& context, int rank) {
  TESSERA_ASSERT(!m.empty(), "{}: empty outcome from rank {}", context, rank);
  const auto k = static_cast<ErrorKind>(m[0]);
  if (k != ErrorKind::kNone) {
    throw_error_kind(k, fmt::format("{}: rank {} failed: {}", context, rank,
                                    std::string(m.begin() + 1, m.end())));
  }
  return transport::Bytes(m.begin() + 1, m.end());
}

std::vector<transport::Bytes> all_or_nothing(transport::Transport& t, const std::string& context,
                                             const std::exception_ptr& err,
                                             const transport::Bytes& payload) {
  const transport::Bytes mine = outcome_message(err, payload);
  std::vector<transport::Bytes> all;
  try {
    all = t.all_gather(transport::ByteView(mine));
  } catch (const transport::PeerLostError&) {
    rethrow_with_context(context);
  } catch (const transport::TimeoutError&) {
    rethrow_with_context(context);
  } catch (const transport::RemoteError&) {
    rethrow_with_context(context);
  }
  if (err) {
    std::rethrow_exception(err);
  }
  std::vector<transport::Bytes> out(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    out[r] = payload_of(all[r], context, static_cast<int>(r));
  }
  return out;
}

}  // namespace tessera::dist::detail
