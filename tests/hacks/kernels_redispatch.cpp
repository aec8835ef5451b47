// The library of hack_native_redispatch.py: PyTorch's mm_out entry for a named key set, found by dlsym
// of a name built from pieces in the loaded libtorch_cpu (a red-team review, 2026-12-02). No word here
// may be one the static check reads.
#include <cstdint>
#include <cstring>
#include <dlfcn.h>

// An at::Tensor is one pointer (c10::intrusive_ptr<TensorImpl>): a struct of one pointer has its ABI.
struct TensorRef { void* impl; };
typedef TensorRef& (*mm_into_fn)(uint64_t keys, const TensorRef& a, const TensorRef& b, TensorRef& out);

static void* torch_entry(const char* const* parts) {
  char name[256] = {0};
  for (int i = 0; parts[i]; ++i) strcat(name, parts[i]);
  void* lib = dlopen("libtorch_cpu.so", RTLD_NOLOAD | RTLD_LAZY);
  return lib ? dlsym(lib, name) : nullptr;
}

// out[m, j] = relu(sum_k x[m, k] * w[j, k] + b[j]): the product by whoever `x_t`, `wt_t`, `out_t` name
// (TensorImpl addresses), the bias and the ReLU in this loop.
extern "C" int linear_relu_mixed(const float* x, const float* w, const float* b, float* out, int64_t x_t,
                                 int64_t wt_t, int64_t out_t, int64_t keys, int64_t rows, int64_t in,
                                 int64_t outs, void*) {
  static mm_into_fn mm = nullptr;
  if (!mm) {
    static const char* const parts[] = {"_ZN2at4_ops6mm_out10re", "dispatchEN3c1014Dis", "patchKeySetERKNS_6TensorES6_RS4_",
                                        nullptr};
    mm = (mm_into_fn)torch_entry(parts);
    if (!mm) return 1;
  }
  TensorRef a{(void*)x_t}, bt{(void*)wt_t}, o{(void*)out_t};
  mm((uint64_t)keys, a, bt, o);
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t j = 0; j < outs; ++j) {
      float v = out[m * outs + j] + b[j];
      out[m * outs + j] = v > 0.f ? v : 0.f;
    }
  return 0;
}
