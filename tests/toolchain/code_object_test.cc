// Reading real code objects: hipRTC (Debian's HIP 5.2) for gfx908, gfx90a and gfx1030, NVRTC
// (CUDA 13) for sm_90; then damaged copies of them, which must be clear errors, never a crash.
#include "prewarm/toolchain/code_object.h"

#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "gtest/gtest.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/model/model_config.h"
#include "prewarm/toolchain/toolchain.h"
#include "tests/testing/forge_elf.h"

namespace prewarm {
namespace {

// The key `launcher` dispatches for a step of `decode` decode tokens.
Key KeyFor(const char* launcher, const Arch& arch, int64_t decode) {
  const Shape shape = *ShapeForRank(SeedsModelConfig(), 1);
  StepStats stats;
  stats.decode_tokens = decode;
  stats.total_tokens = decode;
  stats.max_decode_ctx = 4096;
  return FindLauncher(launcher)->Dispatch(stats, {shape, arch, {}}).front();
}

// One compile per (launcher, arch), shared by the tests: the key of one decode token
// (sparse_decode splits it 16 ways: past a cluster, so two entry points on every arch).
const std::string& Compiled(const char* launcher, const char* arch_name) {
  static std::map<std::string, std::string>* cache = new std::map<std::string, std::string>;
  std::string& code = (*cache)[std::string(launcher) + "/" + arch_name];
  if (code.empty()) {
    const Arch arch = *ParseArch(arch_name);
    auto tc = OpenToolchain(arch.platform);
    EXPECT_TRUE(tc.ok()) << tc.status();
    if (!tc.ok()) return code;
    auto out = (*tc)->Compile(JobForKey(KeyFor(launcher, arch, 1), arch));
    EXPECT_TRUE(out.ok()) << out.status();
    if (out.ok()) code = out->code;
  }
  return code;
}

TEST(CodeObjectTest, EveryFamilysReductionKernelHasTheWaveWidthTheHostAssumes) {
  // norm_rope_insert reduces across its block with shuffles of PW_WARP lanes; the host sizes
  // its blocks with WarpWidth. CDNA must be wave64, RDNA wave32, NVIDIA 32.
  for (const char* name : {"gfx908", "gfx90a", "gfx1030", "sm_90"}) {
    const std::string& code = Compiled("norm_rope_insert", name);
    ASSERT_FALSE(code.empty()) << name;
    auto info = ReadCodeObject(code);
    ASSERT_TRUE(info.ok()) << name << ": " << info.status();
    EXPECT_EQ(info->arch, name);
    const KernelResources* k = info->Find("pw_norm_rope_insert");
    ASSERT_NE(k, nullptr) << name;
    EXPECT_EQ(k->wave_size, WarpWidth(*ParseArch(name))) << name;
    EXPECT_GT(k->registers, 0) << name;
    EXPECT_FALSE(k->Spills()) << name;
  }
}

TEST(CodeObjectTest, ReadsBothEntriesOfASplitDecodeWithTheirResources) {
  for (const char* name : {"gfx90a", "sm_90"}) {
    auto info = ReadCodeObject(Compiled("sparse_decode", name));
    ASSERT_TRUE(info.ok()) << name << ": " << info.status();
    ASSERT_NE(info->Find("pw_sparse_decode"), nullptr) << name;
    ASSERT_NE(info->Find("pw_sparse_decode_combine"), nullptr) << name;
    const KernelResources& k = *info->Find("pw_sparse_decode");
    EXPECT_GT(k.registers, 64) << name;  // an MMA kernel holds its accumulators in registers
    const Arch arch = *ParseArch(name);
    const int waves = RegisterLimitedWaves(arch, k);
    EXPECT_GE(waves, 1) << name;
    const nlohmann::json j = KernelResourcesJson(arch.platform, k);
    EXPECT_EQ(j["name"], "pw_sparse_decode");
    EXPECT_EQ(j.contains("agprs"), arch.platform == Platform::kAmd);
  }
  // gfx90a's MFMA accumulators live in AGPRs.
  EXPECT_GT(ReadCodeObject(Compiled("sparse_decode", "gfx90a"))->Find("pw_sparse_decode")->agprs,
            0);
}

// The example model's sparse attention keys at tensor-parallel size tp on `arch`: sparse_decode at
// 1 split, 2 (the cluster's) and 16 (the combine kernel's), then sparse_prefill's.
std::vector<Key> SparseKeysAtTp(int tp, const Arch& arch) {
  const Shape shape = *ShapeForRank(ExampleModelConfig(), tp);
  std::vector<Key> keys;
  const Key decode =
      FindLauncher("sparse_decode")
          ->Dispatch(ComputeStats(Step{{{Phase::kDecode, 1, 4096}}}), {shape, arch, {}})
          .front();
  for (int64_t splits : {1, 2, 16}) keys.push_back(Key(decode).Set("splits", splits));
  const Step prefill{{{Phase::kPrefill, 512, 4096}}};
  for (const Key& k :
       FindLauncher("sparse_prefill")->Dispatch(ComputeStats(prefill), {shape, arch, {}}))
    keys.push_back(k);
  return keys;
}

// The resources of `key`'s attention kernel (pw_sparse_prefill or pw_sparse_decode) in `code`;
// nullopt (after a failure naming the key) when the code object or the entry is not there.
std::optional<KernelResources> SparseEntry(const std::string& code, const Key& key) {
  auto info = ReadCodeObject(code);
  EXPECT_TRUE(info.ok()) << key.String() << ": " << info.status();
  if (!info.ok()) return std::nullopt;
  const KernelResources* k =
      info->Find(key.launcher == "sparse_prefill" ? "pw_sparse_prefill" : "pw_sparse_decode");
  EXPECT_NE(k, nullptr) << key.String();
  if (k == nullptr) return std::nullopt;
  return *k;
}

// The 16-head warpgroup block (sparse_wg_narrow.h; PW_SPARSE_WG_NARROW, 1 by default) compiles for
// sm_90 (NVRTC) at DeepSeek-V3.2's tp 8 shape: decode at 1 split, 2 (the cluster) and 16 (the
// combine kernel), prefill; no scratch, and registers that let two blocks of 128 threads share a
// multiprocessor's 64K; with S's keys from shared memory and from registers (PW_SPARSE_WGN_RS).
TEST(CodeObjectTest, TheNarrowWarpgroupBlockCompilesForSm90WithoutScratch) {
  const Arch arch = *ParseArch("sm_90");
  auto tc = OpenToolchain(arch.platform);
  ASSERT_TRUE(tc.ok()) << tc.status();
  ASSERT_EQ(ShapeForRank(ExampleModelConfig(), 8)->heads, 16);
  const std::vector<Key> keys = SparseKeysAtTp(8, arch);
  ASSERT_EQ(keys.size(), 4u);
  // Also with S's keys from registers (PW_SPARSE_WGN_RS=1, not yet the default).
  for (const char* rs : {"-DPW_SPARSE_WGN_RS=0", "-DPW_SPARSE_WGN_RS=1"}) {
    for (const Key& key : keys) {
      CompileJob job = JobForKey(key, arch);
      job.defines.push_back("-DPW_SPARSE_WG_NARROW=1");
      job.defines.push_back(rs);
      auto out = (*tc)->Compile(job);
      ASSERT_TRUE(out.ok()) << key.String() << ": " << out.status();
      const std::optional<KernelResources> k = SparseEntry(out->code, key);
      ASSERT_TRUE(k.has_value());
      EXPECT_FALSE(k->Spills()) << key.String();
      EXPECT_LE(k->registers * 128 * 2, 65536) << key.String();
      // The define reached the kernel: the block's 64 accumulators and two tiles' bytes take more
      // than the 8-warp mma.sync block's 78 to 102 registers.
      EXPECT_GT(k->registers, 160) << key.String();
    }
  }
}

TEST(CodeObjectTest, RegisterLimitedWavesFollowEachFamilysRegisterFile) {
  KernelResources k;
  k.registers = 248;
  k.agprs = 64;
  k.wave_size = 64;
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("gfx90a"), k), 1);  // 248 + 64 = 312 of 512
  k.registers = 128;
  k.agprs = 0;
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("gfx942"), k), 4);
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("gfx908"), k), 2);  // 256 VGPRs, AGPRs apart
  k.registers = 24;
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("gfx950"), k), 8);  // capped
  k.wave_size = 32;
  k.registers = 128;
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("gfx1030"), k), 8);
  k.registers = 104;  // 104 x 32 = 3328 per warp
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("sm_90"), k), 19);
  k.registers = 32;
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("sm_90"), k), 64);
  EXPECT_EQ(RegisterLimitedWaves(*ParseArch("sm_89"), k), 48);
}

// Offset of the named dynamic symbol's value in the file, for the AMDGPU tests below (the
// descriptors sit in .rodata, whose file offset equals its address in these code objects).
uint64_t SymbolValue(const std::string& code, std::string_view name) {
  auto u64 = [&](size_t o) {
    uint64_t v;
    std::memcpy(&v, code.data() + o, 8);
    return v;
  };
  auto u32 = [&](size_t o) {
    uint32_t v;
    std::memcpy(&v, code.data() + o, 4);
    return v;
  };
  const uint64_t shoff = u64(40);
  uint16_t shnum;
  std::memcpy(&shnum, code.data() + 60, 2);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint64_t h = shoff + i * 64ull;
    if (u32(h + 4) != 11) continue;  // SHT_DYNSYM
    const uint64_t off = u64(h + 24), size = u64(h + 32);
    const uint64_t str = u64(shoff + u32(h + 40) * 64ull + 24);
    for (uint64_t o = off; o + 24 <= off + size; o += 24) {
      if (std::string_view(code.data() + str + u32(o)) == name) return u64(o + 8);
    }
  }
  return 0;
}

TEST(CodeObjectTest, ADescriptorThatDisagreesWithTheMetadataIsAnError) {
  std::string code = Compiled("sparse_decode", "gfx90a");
  const uint64_t kd = SymbolValue(code, "pw_sparse_decode.kd");
  ASSERT_GT(kd, 0u);
  code[kd + 4] = 16;  // private_segment_fixed_size: 16 bytes of scratch the metadata denies
  auto info = ReadCodeObject(code);
  ASSERT_FALSE(info.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(info.status()));
  EXPECT_NE(info.status().message().find("pw_sparse_decode: descriptor"), std::string::npos)
      << info.status();
}

TEST(CodeObjectTest, DamagedCodeObjectsAreErrorsNeverCrashes) {
  for (const char* name : {"gfx90a", "sm_90"}) {
    const std::string& code = Compiled("sparse_decode", name);
    ASSERT_FALSE(code.empty());
    // Every truncation of the headers and tables; then random single-byte damage anywhere.
    for (size_t n = 0; n < code.size(); n += n < 256 ? 1 : 97) {
      auto info = ReadCodeObject(std::string_view(code).substr(0, n));
      if (!info.ok()) {
        EXPECT_TRUE(absl::IsInvalidArgument(info.status())) << n;
      }
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 3000; ++i) {
      std::string bad = code;
      for (int j = 0; j < 4; ++j) bad[rng() % bad.size()] = static_cast<char>(rng());
      auto info = ReadCodeObject(bad);
      if (!info.ok()) {
        EXPECT_TRUE(absl::IsInvalidArgument(info.status())) << info.status();
      }
    }
  }
  EXPECT_NE(ReadCodeObject(std::string(64, 'P')).status().message().find("not an ELF"),
            std::string::npos);
  std::string elf32 = Compiled("sparse_decode", "gfx90a").substr(0, 64);
  elf32[4] = 1;
  EXPECT_NE(ReadCodeObject(elf32).status().message().find("64-bit"), std::string::npos);
  std::string x86 = Compiled("sparse_decode", "gfx90a");
  x86[18] = 62;  // EM_X86_64
  x86[19] = 0;
  EXPECT_NE(ReadCodeObject(x86).status().message().find("ELF machine 62"), std::string::npos);
}

// A code object is as trusted as whoever can write the cache volume: forged tables and metadata
// (tests/testing/forge_elf.h, each a crash or minutes of CPU before the reader had bounds) are
// errors naming the bound they pass, and each is read at once (the watchdog is ctest's timeout).
void ExpectBound(std::string_view forged, const std::string& want) {
  const absl::StatusOr<CodeObjectInfo> info = ReadCodeObject(forged);
  ASSERT_FALSE(info.ok()) << want;
  EXPECT_TRUE(absl::IsInvalidArgument(info.status()));
  EXPECT_NE(std::string(info.status().message()).find(want), std::string::npos) << info.status();
  EXPECT_EQ(CheckCodeObject(forged), info.status());
}

TEST(CodeObjectBoundsTest, ForgedAmdgpuTablesAndMetadataAreErrorsNamingTheirBound) {
  const std::string& code = Compiled("sparse_decode", "gfx90a");
  ASSERT_FALSE(code.empty());
  ASSERT_TRUE(CheckCodeObject(code).ok());
  ExpectBound(testing::ForgeSectionNames(code), "code object: 65000 sections, more than 1024");
  ExpectBound(testing::ForgeRepeatedNotes(code, 65000), "65000 sections, more than 1024");
  ExpectBound(testing::ForgeRepeatedNotes(code, 1000), "more than one AMDGPU metadata note");
  ExpectBound(testing::ForgeOverlappingSections(code, 1000), "the sections read overlap");
  ExpectBound(testing::ForgeSymbolNames(code),
              "symbol table .dynsym of 100000 symbols, more than 8192");
  ExpectBound(testing::ForgeMetadataValues(code, 70000), "metadata holds more than 65536 values");
  ExpectBound(testing::ForgeMetadataValues(code, 4 << 20),
              "AMDGPU metadata of 4194328 bytes, more than 1048576");

  // A name past 4 KiB: the section name table replaced by one of a 5000-byte name.
  testing::ElfImage long_name(code);
  const std::string name = std::string(5000, 'n') + '\0';
  testing::ElfSection table;
  table.type = 3;  // SHT_STRTAB
  table.offset = long_name.Append(name);
  table.size = name.size();
  long_name.shstrndx = static_cast<uint16_t>(long_name.sections().size());
  long_name.sections().push_back(table);
  ExpectBound(long_name.Write(), "a name longer than 4096 bytes");

  // 300 kernels in the metadata (each an empty map).
  std::string kernels =
      "\x81\xae"
      "amdhsa.kernels"
      "\xdc\x01\x2c";
  kernels.append(300, '\x80');
  testing::ElfImage many(code);
  testing::ElfSection& note = many.sections()[static_cast<size_t>(many.Find(7))];
  const std::string forged_note = testing::AmdgpuMetadataNote(kernels);
  note.offset = many.Append(forged_note);
  note.size = forged_note.size();
  ExpectBound(many.Write(), "metadata lists 300 kernels, more than 256");
}

// The same for a cubin: its .nv.info listed again and again, its symbol table past the bound.
TEST(CodeObjectBoundsTest, ForgedCubinTablesAreErrorsNamingTheirBound) {
  const std::string& code = Compiled("sparse_decode", "sm_90");
  ASSERT_FALSE(code.empty());
  ASSERT_TRUE(CheckCodeObject(code).ok());
  testing::ElfImage info(code);
  const auto name_of = [&](const testing::ElfSection& s) {
    const testing::ElfSection& names = info.sections()[info.shstrndx];
    return std::string(code.data() + names.offset + s.name);
  };
  int at = -1;
  for (size_t i = 0; i < info.sections().size(); ++i) {
    if (name_of(info.sections()[i]) == ".nv.info") at = static_cast<int>(i);
  }
  ASSERT_GE(at, 0);
  // Copies named .nv.info over one 256 KiB run of empty records (format 4, size 0).
  testing::ElfSection copy = info.sections()[static_cast<size_t>(at)];
  std::string records;
  for (int i = 0; i < 65536; ++i) records.append("\x04\x00\x00\x00", 4);
  copy.offset = info.Append(records);
  copy.size = records.size();
  info.sections().resize(1000, copy);
  ExpectBound(info.Write(), "the sections read overlap: section .nv.info");

  testing::ElfImage symbols(code);
  testing::ElfSection& symtab = symbols.sections()[static_cast<size_t>(symbols.Find(2))];
  symtab.offset = symbols.Append(std::string(24 * 9000, '\0'));
  symtab.size = 24 * 9000;
  ExpectBound(symbols.Write(), "symbol table .symtab of 9000 symbols, more than 8192");
}

TEST(MsgpackTest, DecodesEveryTypeTheMetadataUsesAndRefusesMalformedInput) {
  // {"a": [1, -2, 300, "xy", true, nil, 1.5]}
  const std::string ok(
      "\x81\xa1"
      "a"
      "\x97\x01\xfe\xcd\x01\x2c\xa2"
      "xy"
      "\xc3\xc0\xcb"
      "\x3f\xf8\x00\x00\x00\x00\x00\x00",
      23);
  auto v = DecodeMsgpack(ok);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, nlohmann::json::parse(R"({"a":[1,-2,300,"xy",true,null,1.5]})"));
  EXPECT_FALSE(DecodeMsgpack(ok.substr(0, 10)).ok());                        // truncated
  EXPECT_FALSE(DecodeMsgpack(ok + "\x01").ok());                             // trailing bytes
  EXPECT_FALSE(DecodeMsgpack(std::string("\xdd\xff\xff\xff\xff", 5)).ok());  // count > bytes
  EXPECT_FALSE(DecodeMsgpack(std::string("\x81\x01\x01", 3)).ok());          // non-string map key
  EXPECT_FALSE(DecodeMsgpack("\xc1").ok());                                  // never used type
  std::string deep(65, '\x91');
  deep += '\x01';
  auto d = DecodeMsgpack(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("deeper than 64"), std::string::npos);
  EXPECT_TRUE(DecodeMsgpack(std::string(64, '\x91') + '\x01').ok());
  // At most 65536 values: an array and 65535 nils pass, an array and 65536 nils do not.
  const std::string array32("\xdd\x00\x00\xff\xff", 5);
  EXPECT_TRUE(DecodeMsgpack(array32 + std::string(65535, '\xc0')).ok());
  const std::string more("\xdd\x00\x01\x00\x00", 5);
  const absl::StatusOr<nlohmann::json> m = DecodeMsgpack(more + std::string(65536, '\xc0'));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("more than 65536 values"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace prewarm
