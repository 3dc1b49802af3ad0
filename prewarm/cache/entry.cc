#include "prewarm/cache/entry.h"

#include "prewarm/util/bytes.h"
#include "prewarm/util/sha256.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

constexpr std::string_view kMagic("PREWARM\0", 8);

void PutString(std::string& out, std::string_view s, int len_bytes) {
  PutLittleEndian(out, s.size(), len_bytes);
  out.append(s);
}

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool Int(int bytes, uint64_t& v) {
    if (data_.size() - pos_ < static_cast<size_t>(bytes)) return false;
    v = GetLittleEndian(data_.substr(pos_), bytes);
    pos_ += static_cast<size_t>(bytes);
    return true;
  }
  bool String(int len_bytes, std::string& s) {
    uint64_t n = 0;
    if (!Int(len_bytes, n) || n > data_.size() - pos_) return false;
    s.assign(data_.substr(pos_, n));
    pos_ += n;
    return true;
  }
  size_t pos() const { return pos_; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// A key or arch read from an entry, for a message: whoever wrote the entry chose its length (up
// to the entry's 64 MiB), and the message goes to logs, health's status and verify's JSON.
std::string Shown(std::string_view s) {
  constexpr size_t kShown = 200;
  if (s.size() <= kShown) return std::string(s);
  return StrCat(s.substr(0, kShown), "... (", s.size(), " bytes)");
}

DecodeResult Reject(RejectReason reason, std::string detail) {
  DecodeResult r;
  r.reason = reason;
  r.detail = std::move(detail);
  return r;
}

}  // namespace

std::string_view RejectReasonName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kBadMagic:
      return "bad_magic";
    case RejectReason::kUnknownVersion:
      return "unknown_version";
    case RejectReason::kTruncated:
      return "truncated";
    case RejectReason::kBadChecksum:
      return "bad_checksum";
    case RejectReason::kWrongKey:
      return "wrong_key";
    case RejectReason::kWrongArch:
      return "wrong_arch";
    case RejectReason::kUnreadable:
      return "unreadable";
    case RejectReason::kNotAFile:
      return "not_a_file";
    case RejectReason::kBadCodeObject:
      return "bad_code_object";
  }
  return "unreadable";
}

std::string EncodeEntry(const Entry& entry) {
  std::string out(kMagic);
  PutLittleEndian(out, kEntryFormatVersion, 4);
  PutString(out, entry.producer, 4);
  PutString(out, entry.key, 4);
  PutString(out, entry.arch, 4);
  PutString(out, entry.payload, 8);
  const Sha256Digest digest = Sha256Of(out);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return out;
}

DecodeResult DecodeEntry(std::string_view bytes, std::string_view expected_key,
                         std::string_view expected_arch) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return Reject(bytes.size() < kMagic.size() ? RejectReason::kTruncated : RejectReason::kBadMagic,
                  "not a prewarm entry (bad magic)");
  }
  Reader r(bytes.substr(kMagic.size()));
  uint64_t version = 0;
  if (!r.Int(4, version)) return Reject(RejectReason::kTruncated, "truncated header");
  if (version != kEntryFormatVersion) {
    return Reject(RejectReason::kUnknownVersion,
                  StrCat("format version ", version, ", this build reads ", kEntryFormatVersion));
  }
  DecodeResult out;
  if (!r.String(4, out.entry.producer) || !r.String(4, out.entry.key) ||
      !r.String(4, out.entry.arch) || !r.String(8, out.entry.payload)) {
    return Reject(RejectReason::kTruncated, "truncated body");
  }
  const size_t body_end = kMagic.size() + r.pos();
  if (bytes.size() != body_end + 32) {
    return Reject(
        bytes.size() < body_end + 32 ? RejectReason::kTruncated : RejectReason::kBadChecksum,
        StrCat("size ", bytes.size(), ", expected ", body_end + 32));
  }
  const Sha256Digest digest = Sha256Of(bytes.substr(0, body_end));
  if (bytes.substr(body_end) !=
      std::string_view(reinterpret_cast<const char*>(digest.data()), digest.size())) {
    return Reject(RejectReason::kBadChecksum, "checksum mismatch");
  }
  if (!expected_key.empty() && out.entry.key != expected_key) {
    return Reject(RejectReason::kWrongKey,
                  StrCat("key is '", Shown(out.entry.key), "', expected '", expected_key, "'"));
  }
  if (!expected_arch.empty() && out.entry.arch != expected_arch) {
    return Reject(RejectReason::kWrongArch,
                  StrCat("arch is ", Shown(out.entry.arch), ", expected ", expected_arch));
  }
  out.ok = true;
  return out;
}

DecodeResult CheckEntryHeader(std::string_view prefix, uint64_t file_size,
                              std::string_view expected_key, std::string_view expected_arch) {
  if (prefix.size() < kMagic.size() || prefix.substr(0, kMagic.size()) != kMagic) {
    return Reject(
        prefix.size() < kMagic.size() ? RejectReason::kTruncated : RejectReason::kBadMagic,
        "not a prewarm entry (bad magic)");
  }
  Reader r(prefix.substr(kMagic.size()));
  uint64_t version = 0, payload = 0;
  DecodeResult out;
  if (!r.Int(4, version)) return Reject(RejectReason::kTruncated, "truncated header");
  if (version != kEntryFormatVersion) {
    return Reject(RejectReason::kUnknownVersion, StrCat("format version ", version));
  }
  if (!r.String(4, out.entry.producer) || !r.String(4, out.entry.key) ||
      !r.String(4, out.entry.arch) || !r.Int(8, payload)) {
    return Reject(RejectReason::kTruncated, "truncated header");
  }
  const uint64_t want = kMagic.size() + r.pos() + payload + 32;
  if (file_size != want) {
    return Reject(file_size < want ? RejectReason::kTruncated : RejectReason::kBadChecksum,
                  StrCat("size ", file_size, ", the header says ", want));
  }
  if (!expected_key.empty() && out.entry.key != expected_key) {
    return Reject(RejectReason::kWrongKey, StrCat("key is '", Shown(out.entry.key), "'"));
  }
  if (!expected_arch.empty() && out.entry.arch != expected_arch) {
    return Reject(RejectReason::kWrongArch, StrCat("arch is ", Shown(out.entry.arch)));
  }
  out.ok = true;
  return out;
}

}  // namespace prewarm
