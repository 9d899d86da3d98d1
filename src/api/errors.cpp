#include "zaris/result.hpp"

namespace zaris {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::ok:
      return "ok";
    case Errc::not_found:
      return "not_found";
    case Errc::lease_lost:
      return "lease_lost";
    case Errc::already_exists:
      return "already_exists";
    case Errc::revision_mismatch:
      return "revision_mismatch";
    case Errc::no_space:
      return "no_space";
    case Errc::too_large:
      return "too_large";
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::busy:
      return "busy";
    case Errc::incompatible_segment:
      return "incompatible_segment";
    case Errc::stale_segment:
      return "stale_segment";
    case Errc::corrupt_segment:
      return "corrupt_segment";
    case Errc::segment_not_ready:
      return "segment_not_ready";
    case Errc::permission_denied:
      return "permission_denied";
    case Errc::io_error:
      return "io_error";
    case Errc::compacted:
      return "compacted";
    case Errc::timed_out:
      return "timed_out";
    case Errc::not_owner:
      return "not_owner";
    case Errc::unsupported:
      return "unsupported";
    case Errc::unavailable:
      return "unavailable";
  }
  return "unknown";
}

}  // namespace zaris
