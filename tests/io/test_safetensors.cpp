// tests/io/test_safetensors.cpp -- the safetensors reader/writer: round trips of every dtype
// class, a corpus of malformed files (each must give an nvfp4::Error naming the file and the
// defect, never a crash), seeded random corruption, atomic writes, and interoperability with
// the official python `safetensors` package in both directions.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "io/io_test_util.h"
#include "nvfp4/error.h"
#include "nvfp4/safetensors.h"

namespace nvfp4 {
namespace {

using test::st_file;
using test::TempDir;
using test::write_bytes;

std::vector<std::uint8_t> iota_bytes(std::size_t n, std::uint8_t start) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(start + i * 7);
  return v;
}

TEST(Safetensors, RoundTripAllKinds) {
  TempDir d;
  const auto f32 = iota_bytes(4 * 6, 1), bf16 = iota_bytes(2 * 5, 2), u8 = iota_bytes(3, 3),
             e4m3 = iota_bytes(2 * 4, 4), i64 = iota_bytes(8 * 2, 5), f4 = iota_bytes(3, 6), scalar = iota_bytes(4, 7);
  std::vector<SafetensorsTensor> ts = {
      {"w.f32", "F32", {2, 3}, f32.data(), f32.size()},
      {"w.bf16", "BF16", {5}, bf16.data(), bf16.size()},
      {"w.u8", "U8", {3}, u8.data(), u8.size()},
      {"w.e4m3", "F8_E4M3", {2, 4}, e4m3.data(), e4m3.size()},
      {"w.i64", "I64", {2}, i64.data(), i64.size()},
      {"w.f4", "F4", {2, 3}, f4.data(), f4.size()},  // 6 elements * 4 bits = 3 bytes
      {"w.scalar", "F32", {}, scalar.data(), scalar.size()},
      {"w.empty", "F16", {0, 7}, nullptr, 0},
  };
  const std::string p = d / "a.safetensors";
  write_safetensors(p, ts, {{"format", "pt"}, {"note", "héllo"}});
  EXPECT_TRUE(test::leftovers(d.path()).empty());
  const std::string bytes = test::read_bytes(p);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header must be padded to a multiple of 8";
  EXPECT_EQ(bytes.size(), safetensors_file_size(ts, {{"format", "pt"}, {"note", "héllo"}}));

  SafetensorsFile f(p);
  ASSERT_EQ(f.entries().size(), ts.size());
  EXPECT_EQ(f.metadata().at("note"), "héllo");
  for (const auto& t : ts) {
    SCOPED_TRACE(t.name);
    const SafetensorsEntry& e = f.at(t.name);
    EXPECT_EQ(e.dtype, t.dtype);
    EXPECT_EQ(e.shape, t.shape);
    ASSERT_EQ(e.nbytes(), t.nbytes);
    if (t.nbytes) {
      EXPECT_EQ(std::memcmp(f.data(e), t.data, t.nbytes), 0);
    }
    // Widest-first ordering keeps every tensor aligned to its element size.
    const int bits = safetensors_dtype_bits(e.dtype);
    if (bits >= 8) {
      EXPECT_EQ((8 + n + e.begin) % static_cast<std::uint64_t>(bits / 8), 0u);
    }
  }
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_THROW(f.at("nope"), Error);
}

TEST(Safetensors, EmptyHeaderIsValid) {
  TempDir d;
  write_bytes(d / "e.safetensors", st_file("{}      ", ""));
  SafetensorsFile f(d / "e.safetensors");
  EXPECT_TRUE(f.entries().empty());
  write_safetensors(d / "w.safetensors", {});
  EXPECT_TRUE(SafetensorsFile(d / "w.safetensors").entries().empty());
}

struct Bad {
  const char* label;
  std::string bytes;
  const char* expect;  // substring of the message
};

std::vector<Bad> malformed_corpus() {
  const std::string f32x2 = R"("dtype":"F32","shape":[2])";
  const std::string eight(8, '\x01');
  std::vector<Bad> c = {
      {"empty file", "", "shorter than the 8-byte"},
      {"truncated length", std::string(5, '\0'), "shorter than the 8-byte"},
      {"header length past the file", st_file("{}", "", 1000), "runs past the end"},
      {"header length huge", st_file("{}", "", 0x7FFFFFFFFFFFFFFFull), "exceeds the 100,000,000"},
      {"header length just over the limit", st_file("{}", "", 100000001ull), "exceeds the 100,000,000"},
      {"header length zero", st_file("", "", 0), "does not start with '{'"},
      {"not JSON", st_file("{abc", ""), "not valid JSON"},
      {"JSON array", st_file("[1, 2]", ""), "does not start with '{'"},
      {"leading space", st_file(" {}", ""), "does not start with '{'"},
      {"trailing garbage", st_file("{} x", ""), "not valid JSON"},
      {"nul padding", st_file(std::string("{}\0\0", 4), ""), "not valid JSON"},
      {"invalid UTF-8", st_file("{\"a\xff\":{}}", ""), "not valid JSON"},
      // 200 000 nested brackets: parsed fine, then the error message's dump() recursed until
      // the stack overflowed (SIGSEGV; an audit on 2026-12-03). Now refused while parsing.
      {"deep nesting in a shape",
       st_file(R"({"a":{"dtype":"F32","shape":[)" + std::string(200000, '[') + std::string(200000, ']') +
                   R"(],"data_offsets":[0,0]}})",
               ""),
       "nests deeper than 64 levels"},
      {"deep nesting in offsets",
       st_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":)" + std::string(200000, '[') +
                   std::string(200000, ']') + "}}",
               ""),
       "nests deeper than 64 levels"},
      {"shape entry quoted at length",
       st_file(R"({"a":{"dtype":"F32","shape":[")" + std::string(100000, 'x') + R"("],"data_offsets":[0,0]}})", ""),
       "xxx..."},
      {"entry not object", st_file(R"({"a":5})", ""), "is not a JSON object"},
      {"missing dtype", st_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight), "has no dtype"},
      {"missing shape", st_file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight), "has no shape"},
      {"missing offsets", st_file(R"({"a":{"dtype":"F32","shape":[2]}})", eight), "has no data_offsets"},
      {"dtype not string", st_file(R"({"a":{"dtype":32,"shape":[2],"data_offsets":[0,8]}})", eight),
       "dtype is not a string"},
      {"unknown dtype", st_file(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", eight),
       "unknown dtype 'Q4'"},
      {"shape negative", st_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       "not a non-negative integer"},
      {"shape non-integer", st_file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", eight),
       "not a non-negative integer"},
      {"shape not array", st_file(R"({"a":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", eight),
       "shape is not an array"},
      {"shape overflow",
       st_file(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", eight),
       "overflows 64 bits"},
      {"offsets arity", st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0]}})", eight), "is not [begin, end]"},
      {"offsets negative", st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[-8,0]}})", eight),
       "is not [begin, end]"},
      {"offsets reversed", st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[8,0]}})", eight), "begin > end"},
      {"size mismatch", st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,4]}})", eight.substr(0, 4)),
       "needs 8"},
      {"hole", st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 + R"(,"data_offsets":[12,20]}})",
                       std::string(20, '\0')),
       "hole of 4 bytes"},
      {"hole at start", st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[4,12]}})", std::string(12, '\0')),
       "hole of 4 bytes"},
      {"overlap", st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"b":{)" + f32x2 + R"(,"data_offsets":[4,12]}})",
                          std::string(12, '\0')),
       "overlaps"},
      {"duplicate name",
       st_file(R"({"a":{)" + f32x2 + R"(,"data_offsets":[0,8]},"a":{)" + f32x2 + R"(,"data_offsets":[8,16]}})",
               std::string(16, '\0')),
       "duplicate key 'a'"},
      {"duplicate field", st_file(R"({"a":{"dtype":"F32","dtype":"U8","shape":[2],"data_offsets":[0,8]}})", eight),
       "duplicate key 'dtype'"},
      {"data past end", st_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
       "past the end"},
      {"trailing bytes", st_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", eight),
       "4 trailing bytes"},
      {"metadata non-string", st_file(R"({"__metadata__":{"a":1}})", ""), "is not a string"},
      {"metadata not object", st_file(R"({"__metadata__":["a"]})", ""), "__metadata__ is not an object"},
      {"F4 odd numel", st_file(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", "\0\0"),
       "do not fill whole bytes"},
      {"F6 partial byte", st_file(R"({"a":{"dtype":"F6_E2M3","shape":[3],"data_offsets":[0,3]}})", "\0\0\0"),
       "do not fill whole bytes"},
  };
  return c;
}

TEST(Safetensors, MalformedCorpus) {
  TempDir d;
  int i = 0;
  for (const Bad& b : malformed_corpus()) {
    SCOPED_TRACE(b.label);
    const std::string p = d / ("bad" + std::to_string(i++) + ".safetensors");
    write_bytes(p, b.bytes);
    try {
      SafetensorsFile f(p);
      ADD_FAILURE() << "accepted a malformed file: " << b.label;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(p), std::string::npos) << m;
      EXPECT_NE(m.find(b.expect), std::string::npos) << "message: " << m << "\nexpected: " << b.expect;
      EXPECT_EQ(m.rfind("[safetensors]", 0), 0u) << m;
      EXPECT_EQ(m.find("[safetensors]", 1), std::string::npos) << "the op is named once: " << m;
    }
  }
}

// A header of many tensors parses in time linear in their count. Until 2026-12-03 the reader
// parsed through nlohmann's callback parser, which rescans the enclosing object after every
// nested one: 10 000 / 20 000 / 40 000 / 100 000 tensors took 1.2 / 5.8 / 48 / 537 s in
// `nvfp4 inspect` on the dev VM; linear, 100 000 take 2.0 s there (0.9 s to open in this test).
// One file of a large MoE model can hold tens of thousands of tensors. The bound below is ~30x
// the linear time and 1/18 of the quadratic one.
TEST(Safetensors, ManyTensorsParseInLinearTime) {
  constexpr int kTensors = 100000;
  std::string header = "{";
  for (int i = 0; i < kTensors; ++i)
    header += (i ? "," : "") + std::string("\"model.layers.") + std::to_string(i) + R"(.w":{"dtype":"U8","shape":[1],"data_offsets":[)" +
              std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  header += "}";
  TempDir d;
  const std::string p = d / "many.safetensors";
  write_bytes(p, st_file(header, std::string(kTensors, '\x5a')));
  const auto t0 = std::chrono::steady_clock::now();
  const SafetensorsFile f(p);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(f.entries().size(), static_cast<std::size_t>(kTensors));
  EXPECT_EQ(f.at("model.layers.77777.w").begin, 77777u);
  EXPECT_LT(s, 30.0) << kTensors << " tensors took " << s << " s to open: a parse that is not linear?";
}

TEST(Safetensors, F4EvenNumelAccepted) {
  TempDir d;
  write_bytes(d / "f4.safetensors", st_file(R"({"a":{"dtype":"F4","shape":[2,2],"data_offsets":[0,2]}})", "\x21\x43"));
  SafetensorsFile f(d / "f4.safetensors");
  EXPECT_EQ(f.at("a").shape, (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(f.at("a").nbytes(), 2u);
}

TEST(Safetensors, NotAFile) {
  TempDir d;
  try {
    SafetensorsFile f(d.path());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SafetensorsFile(d / "missing.safetensors"), Error);
}

// Random truncations and byte flips of a valid file: each must parse or throw Error.
TEST(Safetensors, RandomCorruptionNeverCrashes) {
  TempDir d;
  const auto a = iota_bytes(4 * 8, 1), b = iota_bytes(16, 9);
  write_safetensors(d / "good.safetensors",
                    {{"a", "F32", {2, 4}, a.data(), a.size()}, {"b", "U8", {4, 4}, b.data(), b.size()}},
                    {{"format", "pt"}});
  const std::string good = test::read_bytes(d / "good.safetensors");
  const unsigned seed = 20240611u;
  std::mt19937 rng(seed);
  int accepted = 0;
  for (int it = 0; it < 3000; ++it) {
    std::string m = good;
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 0) m.resize(rng() % good.size());
    else if (kind == 1) m[rng() % m.size()] = static_cast<char>(rng());
    else m[rng() % 16] = static_cast<char>(rng());  // the length field and the header start
    const std::string p = d / "m.safetensors";
    write_bytes(p, m);
    try {
      SafetensorsFile f(p);
      ++accepted;  // e.g. a flipped data byte: still a valid file
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find(p), std::string::npos) << "seed " << seed << " iteration " << it;
    }
  }
  SCOPED_TRACE("seed " + std::to_string(seed));
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, 3000);
}

TEST(Safetensors, WriterRejectsBadInputAndLeavesNothing) {
  TempDir d;
  const auto a = iota_bytes(8, 1);
  const std::string p = d / "out.safetensors";
  write_bytes(p, "previous contents");
  auto expect_fail = [&](std::vector<SafetensorsTensor> ts, const char* what) {
    SCOPED_TRACE(what);
    try {
      write_safetensors(p, ts);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_EQ(test::read_bytes(p), "previous contents");
    EXPECT_TRUE(test::leftovers(d.path()).empty());
  };
  expect_fail({{"a", "F32", {2}, a.data(), 8}, {"a", "F32", {2}, a.data(), 8}}, "appears twice");
  expect_fail({{"a", "F32", {3}, a.data(), 8}}, "needs 12 bytes");
  expect_fail({{"a", "X9", {2}, a.data(), 8}}, "unknown dtype");
  expect_fail({{"__metadata__", "U8", {8}, a.data(), 8}}, "reserved");
  expect_fail({{"", "U8", {8}, a.data(), 8}}, "empty tensor name");
  expect_fail({{"a", "F4", {3}, a.data(), 2}}, "whole bytes");
  EXPECT_THROW(write_safetensors(d / "no/such/dir/x.safetensors", {{"a", "U8", {8}, a.data(), 8}}), Error);
  EXPECT_THROW(write_safetensors(d.path(), {{"a", "U8", {8}, a.data(), 8}}), Error);  // a directory
  // A successful write replaces the old file in one rename.
  write_safetensors(p, {{"a", "U8", {8}, a.data(), 8}});
  EXPECT_EQ(SafetensorsFile(p).at("a").nbytes(), 8u);
  EXPECT_TRUE(test::leftovers(d.path()).empty());
}

// --- python interop -------------------------------------------------------------------------

TEST(SafetensorsPython, OfficialReaderReadsOurFiles) {
  TempDir d;
  const std::string why = test::python_missing(d.path());
  if (!why.empty()) GTEST_SKIP() << why;
  std::vector<float> f(6);
  for (int i = 0; i < 6; ++i) f[static_cast<std::size_t>(i)] = 0.5f * static_cast<float>(i) - 1.0f;
  const std::vector<std::uint16_t> bf16 = {0x3F80, 0xC000, 0x0000};  // 1, -2, 0
  const std::vector<std::uint8_t> u8 = {1, 2, 3, 250}, e4m3 = {0x38, 0x40, 0x7E, 0x01};
  const std::vector<std::uint32_t> u32 = {0x76543210u, 0xFEDCBA98u};
  const std::vector<std::int64_t> i64 = {-5, 1LL << 40};
  const float zero_d = 0.25f;
  write_safetensors(d / "ours.safetensors",
                    {{"f32", "F32", {2, 3}, f.data(), 24},
                     {"bf16", "BF16", {3}, bf16.data(), 6},
                     {"u8", "U8", {2, 2}, u8.data(), 4},
                     {"e4m3", "F8_E4M3", {4}, e4m3.data(), 4},
                     {"u32", "U32", {1, 2}, u32.data(), 8},
                     {"i64", "I64", {2}, i64.data(), 16},
                     {"scalar", "F32", {}, &zero_d, 4}},
                    {{"format", "pt"}});
  const std::string py = R"(
import sys, numpy as np
from safetensors import safe_open
p = sys.argv[1]
with safe_open(p, framework="np") as f:
    assert f.metadata() == {"format": "pt"}, f.metadata()
    meta = {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()}
    assert meta == {"f32": ("F32", [2, 3]), "bf16": ("BF16", [3]), "u8": ("U8", [2, 2]),
                    "e4m3": ("F8_E4M3", [4]), "u32": ("U32", [1, 2]), "i64": ("I64", [2]),
                    "scalar": ("F32", [])}, meta
    assert (f.get_tensor("f32") == np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1).all()
    assert (f.get_tensor("u8") == np.array([[1, 2], [3, 250]], np.uint8)).all()
    assert (f.get_tensor("u32") == np.array([[0x76543210, 0xFEDCBA98]], np.uint32)).all()
    assert (f.get_tensor("i64") == np.array([-5, 1 << 40], np.int64)).all()
    assert f.get_tensor("scalar").shape == () and f.get_tensor("scalar") == 0.25
raw = open(p, "rb").read()
n = int.from_bytes(raw[:8], "little")
assert n % 8 == 0
print("ok")
)";
  write_bytes(d / "check.py", py);
  const auto r = test::run_cmd("python3 " + d / "check.py" + " " + d / "ours.safetensors", d.path());
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.err;
}

TEST(SafetensorsPython, WeReadOfficialWriterFiles) {
  TempDir d;
  const std::string why = test::python_missing(d.path());
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string py = R"(
import sys, numpy as np
from safetensors.numpy import save_file
save_file({"w": np.arange(12, dtype=np.float32).reshape(3, 4) / 8,
           "h": np.array([1.5, -2.0], np.float16),
           "q": np.arange(6, dtype=np.uint8).reshape(2, 3),
           "z": np.zeros((0, 3), np.float32),
           "i": np.array([7], np.int32)}, sys.argv[1], metadata={"format": "np", "k": "v"})
)";
  write_bytes(d / "mk.py", py);
  const auto r = test::run_cmd("python3 " + d / "mk.py" + " " + d / "theirs.safetensors", d.path());
  ASSERT_EQ(r.rc, 0) << r.err;
  SafetensorsFile f(d / "theirs.safetensors");
  EXPECT_EQ(f.metadata().at("k"), "v");
  const auto& w = f.at("w");
  EXPECT_EQ(w.dtype, "F32");
  EXPECT_EQ(w.shape, (std::vector<std::int64_t>{3, 4}));
  for (int i = 0; i < 12; ++i) {
    float v;
    std::memcpy(&v, f.data(w) + 4 * i, 4);
    EXPECT_EQ(v, static_cast<float>(i) / 8);
  }
  EXPECT_EQ(f.at("h").dtype, "F16");
  std::uint16_t h[2];
  std::memcpy(h, f.data(f.at("h")), 4);
  EXPECT_EQ(h[0], 0x3E00);
  EXPECT_EQ(h[1], 0xC000);
  EXPECT_EQ(f.at("q").nbytes(), 6u);
  EXPECT_EQ(f.at("z").nbytes(), 0u);
  EXPECT_EQ(f.at("i").dtype, "I32");
  // And the official reader agrees with a copy we write back from what we read.
  std::vector<SafetensorsTensor> back;
  for (const auto& e : f.entries()) back.push_back({e.name, e.dtype, e.shape, f.data(e), e.nbytes()});
  write_safetensors(d / "back.safetensors", back, f.metadata());
  const std::string py2 = R"(
import sys, numpy as np
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert a.keys() == b.keys()
for k in a: assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and (a[k] == b[k]).all(), k
print("ok")
)";
  write_bytes(d / "cmp.py", py2);
  const auto r2 = test::run_cmd("python3 " + d / "cmp.py" + " " + d / "theirs.safetensors " + d / "back.safetensors",
                                d.path());
  EXPECT_EQ(r2.rc, 0) << r2.err;
}

}  // namespace
}  // namespace nvfp4
