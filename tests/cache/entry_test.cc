#include "prewarm/cache/entry.h"

#include "gtest/gtest.h"

namespace prewarm {
namespace {

const Entry kEntry{"prewarm test", "arch=gfx90a,m_exact=3", "gfx90a",
                   std::string("\x7f"
                               "ELF\0\1",
                               6)};

TEST(EntryTest, RoundTrips) {
  DecodeResult d = DecodeEntry(EncodeEntry(kEntry), kEntry.key, kEntry.arch);
  ASSERT_TRUE(d.ok) << d.detail;
  EXPECT_EQ(d.entry.payload, kEntry.payload);
  EXPECT_EQ(d.entry.producer, kEntry.producer);
}

TEST(EntryTest, EveryTruncationIsRejected) {
  const std::string bytes = EncodeEntry(kEntry);
  for (size_t n = 0; n < bytes.size(); ++n) {
    DecodeResult d = DecodeEntry(bytes.substr(0, n), "", "");
    EXPECT_FALSE(d.ok) << n;
    EXPECT_TRUE(d.reason == RejectReason::kTruncated || d.reason == RejectReason::kBadMagic) << n;
  }
}

TEST(EntryTest, EveryFlippedByteIsRejected) {
  const std::string bytes = EncodeEntry(kEntry);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x20);
    EXPECT_FALSE(DecodeEntry(bad, kEntry.key, kEntry.arch).ok) << "byte " << i;
  }
}

TEST(EntryTest, ReasonsAreSpecific) {
  const std::string bytes = EncodeEntry(kEntry);
  std::string bad = bytes;
  bad[0] = 'X';
  EXPECT_EQ(DecodeEntry(bad, "", "").reason, RejectReason::kBadMagic);
  bad = bytes;
  bad[8] = 2;  // version 2
  EXPECT_EQ(DecodeEntry(bad, "", "").reason, RejectReason::kUnknownVersion);
  bad = bytes;
  bad.back() ^= 1;
  EXPECT_EQ(DecodeEntry(bad, "", "").reason, RejectReason::kBadChecksum);
  EXPECT_EQ(DecodeEntry(bytes + "x", "", "").reason, RejectReason::kBadChecksum);
  DecodeResult d = DecodeEntry(bytes, "arch=gfx90a,m_exact=4", "");
  EXPECT_EQ(d.reason, RejectReason::kWrongKey);
  EXPECT_NE(d.detail.find("m_exact=3"), std::string::npos);
  EXPECT_EQ(DecodeEntry(bytes, kEntry.key, "gfx942").reason, RejectReason::kWrongArch);
  EXPECT_EQ(DecodeEntry("", "", "").reason, RejectReason::kTruncated);
}

// Whoever writes an entry chooses its key's length: a message shows 200 bytes of it and its size.
TEST(EntryTest, AHugeKeyIsShownCutInMessages) {
  Entry huge = kEntry;
  huge.key = std::string(1 << 20, 'k');
  const std::string bytes = EncodeEntry(huge);
  const DecodeResult d = DecodeEntry(bytes, kEntry.key, "");
  EXPECT_EQ(d.reason, RejectReason::kWrongKey);
  EXPECT_EQ(d.detail, "key is '" + std::string(200, 'k') + "... (1048576 bytes)', expected '" +
                          kEntry.key + "'");
  const DecodeResult h = CheckEntryHeader(bytes.substr(0, 4096), bytes.size(), kEntry.key, "");
  EXPECT_EQ(h.reason, RejectReason::kTruncated) << "the key does not fit the 4 KiB header read";
  huge.key = kEntry.key;
  huge.arch = std::string(300, 'a');
  const DecodeResult a = DecodeEntry(EncodeEntry(huge), "", "gfx90a");
  EXPECT_EQ(a.detail, "arch is " + std::string(200, 'a') + "... (300 bytes), expected gfx90a");
}

}  // namespace
}  // namespace prewarm
