// A Windows program that runs ptkit's CPU ops from a cross-built ptkit_cpu.dll against
// torch's own torch_cpu.dll, for tests/integration/test_wine_ops.py (under Wine: no
// Windows CPython can be had on the Linux machine that runs it).
//
// It does what `import ptkit_ops` does, through torch's stable C ABI only: defines the
// ops' schemas (one per line of argv[2], the schemas of ptkit_ops/_library.py), loads
// the DLL (its static initializer registers the CPU kernels), then calls each op through
// the dispatcher on fixed pseudo-random inputs of every dtype and writes every input and
// output to argv[3] as text: `tensor <case> <role> <dtype> <ndim> <sizes…> <hex bytes>`,
// plus `case <case> <op> <arguments>` and `isa <level>` lines.
//
// With a fourth argument `error` it calls rms_norm with an int64 x instead, and says
// whether the op's error came back through the dispatcher as an error code.
//
// Usage: wine_host.exe <ptkit_cpu.dll> <schemas.txt> <out.txt> [error]
#include <windows.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/c/shim.h>
#include <torch/csrc/stable/stableivalue_conversions.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

using torch::stable::Tensor;
namespace sd = torch::stable::detail;  // from / to: C++ values <-> StableIValue

namespace {

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "wine_host: %s\n", why.c_str());
  std::fflush(stderr);
  std::exit(2);
}

void check(AOTITorchError err, const char* what) {
  if (err != AOTI_TORCH_SUCCESS) die(std::string(what) + " failed");
}

uint64_t state = 0x2545f4914f6cdd1dull;
float moderate() {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return static_cast<float>((state >> 40) % 2000001) / 250000.0f - 4.0f;
}

struct DType {
  const char* name;
  int32_t code;
  int size;
};

std::vector<DType> dtypes() {
  return {{"float32", aoti_torch_dtype_float32(), 4},
          {"float16", aoti_torch_dtype_float16(), 2},
          {"bfloat16", aoti_torch_dtype_bfloat16(), 2}};
}

// fp32 -> fp16 / bf16 bits, round to nearest even (finite, moderate values only).
uint16_t to_half(float f, bool bf16) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if (bf16) return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  const uint32_t sign = (b >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((b >> 23) & 0xffu) - 127 + 15;
  uint32_t man = b & 0x7fffffu;
  if (exp <= 0) return static_cast<uint16_t>(sign);  // tiny: flush (the inputs have none)
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

Tensor make(const std::vector<int64_t>& sizes, const DType& t) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int i = static_cast<int>(sizes.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * sizes[i + 1];
  AtenTensorHandle h = nullptr;
  check(aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(), t.code,
                                 aoti_torch_device_type_cpu(), 0, &h),
        "aoti_torch_empty_strided");
  Tensor out(h);
  char* data = static_cast<char*>(out.mutable_data_ptr());
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float v = moderate();
    if (t.size == 4) {
      std::memcpy(data + 4 * i, &v, 4);
    } else {
      const uint16_t h16 = to_half(v, std::strcmp(t.name, "bfloat16") == 0);
      std::memcpy(data + 2 * i, &h16, 2);
    }
  }
  return out;
}

void write_tensor(std::ofstream& out, int id, const char* role, const DType& t, const Tensor& x) {
  out << "tensor " << id << " " << role << " " << t.name << " " << x.dim();
  for (int64_t d = 0; d < x.dim(); ++d) out << " " << x.size(d);
  out << " ";
  const unsigned char* p = static_cast<const unsigned char*>(x.const_data_ptr());
  static const char* hex = "0123456789abcdef";
  for (int64_t i = 0; i < x.numel() * t.size; ++i) out << hex[p[i] >> 4] << hex[p[i] & 15];
  out << "\n";
}

Tensor call(const char* op, std::vector<StableIValue> stack) {
  stack.resize(std::max<size_t>(stack.size(), 1));
  check(torch_call_dispatcher(op, "", stack.data(), TORCH_ABI_VERSION), op);
  return sd::to<Tensor>(stack[0]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && !(argc == 5 && std::strcmp(argv[4], "error") == 0))
    die("usage: wine_host.exe <ptkit_cpu.dll> <schemas.txt> <out.txt> [error]");
  TorchLibraryHandle lib = nullptr;
  check(aoti_torch_library_init_fragment("ptkit", __FILE__, __LINE__, &lib), "init_fragment");
  std::ifstream schemas(argv[2]);
  std::string schema;
  int defined = 0;
  while (std::getline(schemas, schema)) {
    if (schema.empty()) continue;
    check(aoti_torch_library_def(lib, schema.c_str()), schema.c_str());
    ++defined;
  }
  if (defined == 0) die(std::string("no schemas in ") + argv[2]);
  HMODULE dll = LoadLibraryA(argv[1]);
  if (dll == nullptr) die(std::string("LoadLibrary(") + argv[1] + ") failed, error " + std::to_string(GetLastError()));
  using IsaFn = const char* (*)();
  const auto isa = reinterpret_cast<IsaFn>(reinterpret_cast<void*>(GetProcAddress(dll, "ptkit_cpu_isa")));
  if (isa == nullptr) die("ptkit_cpu.dll exports no ptkit_cpu_isa");

  if (argc == 5) {
    const DType i64{"int64", aoti_torch_dtype_int64(), 8};
    Tensor x = make({2, 8}, i64), w = make({8}, dtypes()[0]);
    std::vector<StableIValue> stack = {sd::from(x), sd::from(w), sd::from(1e-6)};
    const AOTITorchError err = torch_call_dispatcher("ptkit::rms_norm", "", stack.data(), TORCH_ABI_VERSION);
    std::printf("wine_host: rms_norm on int64 returned %s\n", err == AOTI_TORCH_SUCCESS ? "success" : "an error code");
    return err == AOTI_TORCH_SUCCESS ? 1 : 0;
  }
  std::ofstream out(argv[3]);
  out << "isa " << isa() << "\n";
  int id = 0;
  const char* activations[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};
  for (const DType& t : dtypes()) {
    {  // rms_norm over rows of 1000 (a tail after the vector loop) and of 8
      for (int64_t cols : {1000, 8}) {
        Tensor x = make({4, cols}, t), w = make({cols}, t);
        Tensor y = call("ptkit::rms_norm", {sd::from(x), sd::from(w), sd::from(1e-6)});
        out << "case " << id << " rms_norm eps=1e-06\n";
        write_tensor(out, id, "x", t, x);
        write_tensor(out, id, "weight", t, w);
        write_tensor(out, id, "out", t, y);
        ++id;
      }
    }
    {
      Tensor x = make({3, 2 * 37}, t);
      Tensor y = call("ptkit::silu_and_mul", {sd::from(x)});
      out << "case " << id << " silu_and_mul\n";
      write_tensor(out, id, "x", t, x);
      write_tensor(out, id, "out", t, y);
      ++id;
    }
    for (const char* act : activations) {
      for (int64_t m : {1, 5, 40}) {  // decode GEMV rows, and the large-m path
        for (bool bias : {false, true}) {
          Tensor x = make({m, 64}, t), w = make({24, 64}, t), b = make({24}, t);
          const std::optional<Tensor> given = bias ? std::optional<Tensor>(b) : std::nullopt;
          Tensor y = call("ptkit::fused_linear", {sd::from(x), sd::from(w), sd::from(given), sd::from(std::string(act))});
          out << "case " << id << " fused_linear activation=" << act << " bias=" << (bias ? 1 : 0) << "\n";
          write_tensor(out, id, "x", t, x);
          write_tensor(out, id, "weight", t, w);
          if (bias) write_tensor(out, id, "bias", t, b);
          write_tensor(out, id, "out", t, y);
          ++id;
        }
      }
    }
  }
  out << "done " << id << "\n";
  out.close();
  std::printf("wine_host: %d cases, isa %s\n", id, isa());
  return 0;
}
