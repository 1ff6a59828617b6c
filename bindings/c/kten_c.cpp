// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The C API (<kten/kten.h>): a thin layer over kten's public C++ API. Every entry point runs its
// body inside guarded(), which turns each kten exception class into its status code and keeps the
// message for kten_last_error(); nothing else escapes (the functions are noexcept, so a bug that
// let an exception through would end in std::terminate, never unwind into C or Fortran frames).

#include <kten/kten.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <kten/checkpoint.hpp>
#include <kten/config.hpp>
#include <kten/dist/process_group.hpp>
#if KTEN_WITH_MPI
#include <kten/dist_mpi.hpp>
#endif
#include <kten/kokkos.hpp>
#include <kten/kten.hpp>
#include <kten/onnx.hpp>

namespace {

thread_local std::string last_error;
std::atomic<std::int64_t> live_handles{0};

// A C failure of the API's own (a NULL handle, a rank out of range): KTEN_INVALID_ARGUMENT.
struct InvalidArgument {
  std::string message;
};

template <class F>
kten_status guarded(const char* function, F&& body) noexcept {
  try {
    body();
    return KTEN_OK;
  } catch (const InvalidArgument& e) {
    last_error = std::string(function) + ": " + e.message;
    return KTEN_INVALID_ARGUMENT;
  } catch (const kten::DeviceUnavailable& e) {
    last_error = e.what();
    return KTEN_DEVICE_UNAVAILABLE;
  } catch (const kten::DeviceMismatch& e) {
    last_error = e.what();
    return KTEN_DEVICE_MISMATCH;
  } catch (const kten::ShapeError& e) {
    last_error = e.what();
    return KTEN_SHAPE_ERROR;
  } catch (const kten::DTypeError& e) {
    last_error = e.what();
    return KTEN_DTYPE_ERROR;
  } catch (const kten::IndexError& e) {
    last_error = e.what();
    return KTEN_INDEX_ERROR;
  } catch (const kten::OutOfMemory& e) {
    last_error = e.what();
    return KTEN_OUT_OF_MEMORY;
  } catch (const kten::FormatError& e) {
    last_error = e.what();
    return KTEN_FORMAT_ERROR;
  } catch (const kten::SyncError& e) {
    last_error = e.what();
    return KTEN_SYNC_ERROR;
  } catch (const kten::ThreadError& e) {
    last_error = e.what();
    return KTEN_THREAD_ERROR;
  } catch (const kten::Error& e) {
    last_error = e.what();
    return KTEN_ERROR;
  } catch (const std::bad_alloc&) {
    last_error = std::string(function) + ": out of host memory";
    return KTEN_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = std::string(function) + ": internal error: " + e.what();
    return KTEN_INTERNAL_ERROR;
  } catch (...) {
    last_error = std::string(function) + ": internal error: an unknown exception";
    return KTEN_INTERNAL_ERROR;
  }
}

[[noreturn]] void invalid(std::string message) { throw InvalidArgument{std::move(message)}; }

template <class T>
T& need(T* handle, const char* what) {
  if (!handle) invalid(std::string("the ") + what + " handle is NULL (freed, or never made)");
  return *handle;
}

template <class P>
void need_out(P* out) {
  if (!out) invalid("the pointer to the output handle is NULL");
}

}  // namespace

// A handle: one reference-counted C++ value. The count is the C caller's; kten's own objects keep
// theirs (an optimiser holds its model's object, not its handle).
struct kten_tensor_s {
  std::atomic<int> refs{1};
  kten::Tensor tensor;
  explicit kten_tensor_s(kten::Tensor t) : tensor(std::move(t)) { ++live_handles; }
  ~kten_tensor_s() { --live_handles; }
};
struct kten_model_s {
  std::atomic<int> refs{1};
  std::shared_ptr<kten::onnx::Model> model;
  explicit kten_model_s(std::shared_ptr<kten::onnx::Model> m) : model(std::move(m)) { ++live_handles; }
  ~kten_model_s() { --live_handles; }
};
struct kten_optimizer_s {
  std::atomic<int> refs{1};
  std::shared_ptr<kten::onnx::Model> model;
  std::unique_ptr<kten::optim::Optimizer> optimizer;
  std::shared_ptr<const kten::dist::ProcessGroup> group;  // data parallel: step() averages over it
  kten_optimizer_s(std::shared_ptr<kten::onnx::Model> m, std::unique_ptr<kten::optim::Optimizer> o)
      : model(std::move(m)), optimizer(std::move(o)) {
    ++live_handles;
  }
  ~kten_optimizer_s() { --live_handles; }
};

namespace {

template <class H>
void release(H*& handle) {
  if (handle && --handle->refs == 0) delete handle;
  handle = nullptr;
}

// Stores a new handle in *out, releasing what *out held.
template <class H, class... Args>
void emplace(H** out, Args&&... args) {
  H* made = new H(std::forward<Args>(args)...);
  release(*out);
  *out = made;
}

kten::Device to_device(kten_device d) {
  if (d.kind == 0) return kten::cpu();
  if (d.kind == 1) {
    if (d.index < 0) invalid("a GPU index must be >= 0, got " + std::to_string(d.index));
    return kten::gpu(d.index);
  }
  invalid("a device kind is 0 (cpu) or 1 (gpu), got " + std::to_string(d.kind));
}

kten::DType to_dtype(kten_dtype dtype) {
  switch (dtype) {
    case KTEN_FLOAT32: return kten::DType::float32;
    case KTEN_FLOAT64: return kten::DType::float64;
    case KTEN_INT64: return kten::DType::int64;
  }
  invalid("a dtype is KTEN_FLOAT32, KTEN_FLOAT64 or KTEN_INT64, got " + std::to_string(static_cast<int>(dtype)));
}

// A one-dimensional unmanaged View of `span` elements at `data` in the memory space of `device`,
// wrapped by from_view; the caller's shape and strides are then laid over its storage.
template <class T>
kten::Tensor wrap_span(void* data, std::size_t span, const kten::Device& device) {
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  T* p = static_cast<T*>(data);
  if (device.is_cpu()) return kten::from_view(Kokkos::View<T*, Kokkos::HostSpace, Unmanaged>(p, span), device);
  using DeviceSpace = Kokkos::DefaultExecutionSpace::memory_space;
  return kten::from_view(Kokkos::View<T*, DeviceSpace, Unmanaged>(p, span), device);
}

kten::Tensor wrap(void* data, kten_dtype dtype, std::int32_t ndim, const std::int64_t* shape,
                  const std::int64_t* strides, kten_device device) {
  const kten::Device dev = to_device(device);
  const kten::DType dt = to_dtype(dtype);
  if (ndim < 0 || ndim > KTEN_MAX_RANK)
    invalid("an array has 0 to " + std::to_string(KTEN_MAX_RANK) + " dimensions, got " + std::to_string(ndim));
  if (ndim > 0 && !shape) invalid("the shape is NULL");
  kten::require_available(dev);
  kten::Shape s(shape, shape + ndim), st(static_cast<std::size_t>(ndim));
  // The span: 1 + sum (extent - 1) * stride elements (0 when an extent is 0), in 64 bits.
  std::int64_t span = 1, run = 1;
  for (int d = ndim; d-- > 0;) {
    if (s[d] < 0) invalid("extents must be >= 0, got " + kten::shape_str(s));
    st[d] = strides ? strides[d] : run;
    if (st[d] < 0) invalid("strides must be >= 0, got " + std::to_string(st[d]) + " on axis " + std::to_string(d));
    if (s[d] == 0) span = 0;
    if (span > 0 && s[d] > 1) {
      if (st[d] > (INT64_MAX - span) / (s[d] - 1)) invalid("the array's extent in memory overflows 64 bits");
      span += (s[d] - 1) * st[d];
    }
    if (!strides && s[d] > 0) {
      if (run > INT64_MAX / s[d]) invalid("the array's size overflows 64 bits");
      run *= s[d];
    }
  }
  if (span > 0 && !data) invalid("the data pointer is NULL");
  const auto n = static_cast<std::size_t>(span);
  kten::Tensor base = dt == kten::DType::float32   ? wrap_span<float>(data, n, dev)
                      : dt == kten::DType::float64 ? wrap_span<double>(data, n, dev)
                                                   : wrap_span<std::int64_t>(data, n, dev);
  return kten::Tensor(base.storage(), std::move(s), std::move(st), 0, dt);
}

}  // namespace

extern "C" {

const char* kten_last_error(void) { return last_error.c_str(); }

namespace {
// Made by kten_init, ended by kten_finalize. Never destroyed by the static destructors: a program
// that stops without kten_finalize (error stop) leaves Kokkos to the process' end, since a
// finalize during exit would run after kten's own statics are gone.
kten::ScopeGuard* scope = nullptr;
}  // namespace

kten_status kten_init(void) {
  return guarded("kten_init", [] {
    if (!scope) scope = new kten::ScopeGuard();
  });
}

kten_status kten_finalize(void) {
  return guarded("kten_finalize", [] {
    delete scope;
    scope = nullptr;
  });
}

kten_device kten_cpu(void) { return kten_device{0, 0}; }
kten_device kten_gpu(int32_t index) { return kten_device{1, index}; }

kten_status kten_num_gpus(int32_t* count) {
  return guarded("kten_num_gpus", [&] {
    if (!count) invalid("count is NULL");
    *count = kten::num_gpus();
  });
}

int64_t kten_live_handles(void) { return live_handles.load(); }

kten_status kten_tensor_wrap(kten_tensor* out, void* data, kten_dtype dtype, int32_t ndim, const int64_t* shape,
                             const int64_t* strides, kten_device device) {
  return guarded("kten_tensor_wrap", [&] {
    need_out(out);
    emplace(out, wrap(data, dtype, ndim, shape, strides, device));
  });
}

kten_status kten_tensor_zeros(kten_tensor* out, kten_dtype dtype, int32_t ndim, const int64_t* shape,
                              kten_device device) {
  return guarded("kten_tensor_zeros", [&] {
    need_out(out);
    if (ndim < 0 || ndim > KTEN_MAX_RANK || (ndim > 0 && !shape)) invalid("the shape is NULL or its rank out of range");
    emplace(out, kten::zeros(kten::Shape(shape, shape + ndim), to_device(device), to_dtype(dtype)));
  });
}

kten_status kten_tensor_copy_to(kten_tensor t, void* data, kten_dtype dtype, int32_t ndim, const int64_t* shape,
                                const int64_t* strides, kten_device device) {
  return guarded("kten_tensor_copy_to", [&] {
    const kten::Tensor& src = need(t, "tensor").tensor;
    wrap(data, dtype, ndim, shape, strides, device).copy_from(src.detach());
    kten::synchronize(to_device(device));
  });
}

kten_status kten_tensor_to(kten_tensor* out, kten_tensor t, kten_device device) {
  return guarded("kten_tensor_to", [&] {
    need_out(out);
    emplace(out, need(t, "tensor").tensor.to(to_device(device)));
  });
}

kten_status kten_tensor_ndim(kten_tensor t, int32_t* ndim) {
  return guarded("kten_tensor_ndim", [&] {
    if (!ndim) invalid("ndim is NULL");
    *ndim = need(t, "tensor").tensor.ndim();
  });
}

kten_status kten_tensor_shape(kten_tensor t, int64_t* shape) {
  return guarded("kten_tensor_shape", [&] {
    const kten::Tensor& x = need(t, "tensor").tensor;
    if (!shape && x.ndim() > 0) invalid("shape is NULL");
    for (int d = 0; d < x.ndim(); ++d) shape[d] = x.shape()[d];
  });
}

kten_status kten_tensor_dtype(kten_tensor t, kten_dtype* dtype) {
  return guarded("kten_tensor_dtype", [&] {
    if (!dtype) invalid("dtype is NULL");
    switch (need(t, "tensor").tensor.dtype()) {
      case kten::DType::float32: *dtype = KTEN_FLOAT32; return;
      case kten::DType::float64: *dtype = KTEN_FLOAT64; return;
      case kten::DType::int64: *dtype = KTEN_INT64; return;
      case kten::DType::boolean: break;
    }
    throw kten::DTypeError("kten_tensor_dtype: a boolean tensor has no dtype of the C API");
  });
}

kten_status kten_tensor_device(kten_tensor t, kten_device* device) {
  return guarded("kten_tensor_device", [&] {
    if (!device) invalid("device is NULL");
    const kten::Device d = need(t, "tensor").tensor.device();
    *device = kten_device{d.is_cpu() ? 0 : 1, d.index()};
  });
}

kten_status kten_tensor_data(kten_tensor t, void** data) {
  return guarded("kten_tensor_data", [&] {
    if (!data) invalid("data is NULL");
    *data = need(t, "tensor").tensor.data();
  });
}

kten_status kten_tensor_item(kten_tensor t, double* value) {
  return guarded("kten_tensor_item", [&] {
    if (!value) invalid("value is NULL");
    *value = need(t, "tensor").tensor.item<double>();
  });
}

kten_status kten_tensor_requires_grad(kten_tensor t, int32_t on) {
  return guarded("kten_tensor_requires_grad", [&] { need(t, "tensor").tensor.requires_grad_(on != 0); });
}

kten_status kten_tensor_retain(kten_tensor t) {
  return guarded("kten_tensor_retain", [&] { ++need(t, "tensor").refs; });
}

kten_status kten_tensor_free(kten_tensor* t) {
  return guarded("kten_tensor_free", [&] {
    if (t) release(*t);
  });
}

kten_status kten_model_load(kten_model* out, const char* path, kten_device device) {
  return guarded("kten_model_load", [&] {
    need_out(out);
    if (!path) invalid("path is NULL");
    emplace(out, std::make_shared<kten::onnx::Model>(kten::onnx::load(path, to_device(device))));
  });
}

kten_status kten_model_forward(kten_model m, kten_tensor x, kten_tensor* out) {
  return guarded("kten_model_forward", [&] {
    need_out(out);
    kten::onnx::Model& model = *need(m, "model").model;
    emplace(out, model(need(x, "input tensor").tensor));
  });
}

kten_status kten_model_train(kten_model m, int32_t on) {
  return guarded("kten_model_train", [&] { need(m, "model").model->train(on != 0); });
}

kten_status kten_model_save(kten_model m, const char* path) {
  return guarded("kten_model_save", [&] {
    if (!path) invalid("path is NULL");
    kten::onnx::save(path, *need(m, "model").model);
  });
}

kten_status kten_model_num_parameters(kten_model m, int64_t* count) {
  return guarded("kten_model_num_parameters", [&] {
    if (!count) invalid("count is NULL");
    *count = static_cast<int64_t>(need(m, "model").model->parameters().size());
  });
}

kten_status kten_model_parameter(kten_model m, int64_t i, kten_tensor* out) {
  return guarded("kten_model_parameter", [&] {
    need_out(out);
    const std::vector<kten::Tensor> parameters = need(m, "model").model->parameters();
    if (i < 0 || i >= static_cast<int64_t>(parameters.size()))
      throw kten::IndexError("kten_model_parameter: parameter " + std::to_string(i) + " of a model with " +
                             std::to_string(parameters.size()));
    emplace(out, parameters[static_cast<std::size_t>(i)]);
  });
}

kten_status kten_model_retain(kten_model m) {
  return guarded("kten_model_retain", [&] { ++need(m, "model").refs; });
}

kten_status kten_model_free(kten_model* m) {
  return guarded("kten_model_free", [&] {
    if (m) release(*m);
  });
}

kten_status kten_mse_loss(kten_tensor* out, kten_tensor prediction, kten_tensor target) {
  return guarded("kten_mse_loss", [&] {
    need_out(out);
    emplace(out, kten::nn::MSELoss()(need(prediction, "prediction").tensor, need(target, "target").tensor));
  });
}

kten_status kten_cross_entropy_loss(kten_tensor* out, kten_tensor logits, kten_tensor target) {
  return guarded("kten_cross_entropy_loss", [&] {
    need_out(out);
    emplace(out, kten::nn::CrossEntropyLoss()(need(logits, "logits").tensor, need(target, "target").tensor));
  });
}

kten_status kten_backward(kten_tensor loss) {
  return guarded("kten_backward", [&] { need(loss, "loss").tensor.backward(); });
}

kten_status kten_optimizer_adam(kten_optimizer* out, kten_model model, double lr) {
  return guarded("kten_optimizer_adam", [&] {
    need_out(out);
    emplace(out, need(model, "model").model, std::make_unique<kten::optim::Adam>(lr));
  });
}

kten_status kten_optimizer_sgd(kten_optimizer* out, kten_model model, double lr) {
  return guarded("kten_optimizer_sgd", [&] {
    need_out(out);
    emplace(out, need(model, "model").model, std::make_unique<kten::optim::SGD>(lr));
  });
}

kten_status kten_optimizer_distribute(kten_optimizer o, int32_t fortran_comm) {
  return guarded("kten_optimizer_distribute", [&] {
    kten_optimizer_s& opt = need(o, "optimizer");
#if KTEN_WITH_MPI
    auto group = kten::dist::wrap(MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm)));
    // The ranks agree on the number of parameters first (one all_gather, read on the host once):
    // the broadcasts and every step's all-reduces pair parameters by position, and a rank with
    // more of them would wait in a collective the others never call. Their shapes and dtypes
    // are then checked by each collective's own agreement (CollectiveMismatch on every rank).
    const std::vector<kten::Tensor> parameters = opt.model->parameters();
    const kten::Device device = opt.model->device();
    const auto counts = group->all_gather(kten::full({1}, static_cast<double>(parameters.size()), device, kten::float64))
                            .to(kten::cpu())
                            .to_vector<double>();
    if (std::any_of(counts.begin(), counts.end(), [&](double c) { return c != counts[0]; })) {
      std::string each;
      for (std::size_t r = 0; r < counts.size(); ++r) each += (r ? ", " : "") + std::to_string(static_cast<long long>(counts[r]));
      throw kten::dist::CollectiveMismatch("kten_optimizer_distribute: the ranks' models differ: they hold " + each +
                                           " parameters (rank 0 first); every rank must load the same model");
    }
    for (const kten::Tensor& p : parameters) group->broadcast(p.detach(), 0);
    opt.group = std::move(group);
#else
    (void)opt;
    (void)fortran_comm;
    throw kten::Error("kten_optimizer_distribute: this kten was built without MPI (KTEN_ENABLE_MPI=OFF)");
#endif
  });
}

kten_status kten_optimizer_zero_grad(kten_optimizer o) {
  return guarded("kten_optimizer_zero_grad", [&] {
    kten_optimizer_s& opt = need(o, "optimizer");
    opt.optimizer->zero_grad(*opt.model);
  });
}

kten_status kten_optimizer_step(kten_optimizer o) {
  return guarded("kten_optimizer_step", [&] {
    kten_optimizer_s& opt = need(o, "optimizer");
    if (opt.group) {
      // Every parameter's gradient, in the same order on every rank (their count was agreed when
      // the optimiser was distributed): one that a rank lacks is an undefined tensor, which the
      // collective's agreement refuses on every rank, as DistributedDataParallel does, instead of
      // pairing one parameter's gradient with another's.
      kten::NoGradGuard no_grad;
      for (const kten::nn::NamedParameter& p : opt.model->named_parameters()) {
        if (!p.slot->value.defined()) continue;  // not in parameters(): not counted either
        try {
          opt.group->all_reduce(p.slot->value.grad(), kten::dist::ReduceOp::mean);
        } catch (const kten::dist::CollectiveMismatch& e) {
          throw kten::dist::CollectiveMismatch("the gradient of '" + p.name + "': " + e.what());
        }
      }
    }
    opt.optimizer->step(*opt.model);
  });
}

kten_status kten_optimizer_retain(kten_optimizer o) {
  return guarded("kten_optimizer_retain", [&] { ++need(o, "optimizer").refs; });
}

kten_status kten_optimizer_free(kten_optimizer* o) {
  return guarded("kten_optimizer_free", [&] {
    if (o) release(*o);
  });
}

kten_status kten_checkpoint_save(const char* path, kten_model model, kten_optimizer optimizer, int64_t step) {
  return guarded("kten_checkpoint_save", [&] {
    if (!path) invalid("path is NULL");
    kten::save_checkpoint(path, *need(model, "model").model, *need(optimizer, "optimizer").optimizer, step);
  });
}

kten_status kten_checkpoint_load(const char* path, kten_model model, kten_optimizer optimizer, int64_t* step) {
  return guarded("kten_checkpoint_load", [&] {
    if (!path) invalid("path is NULL");
    kten::onnx::Model& m = *need(model, "model").model;
    const std::int64_t saved = kten::load_checkpoint(path, m, *need(optimizer, "optimizer").optimizer, m.device());
    if (step) *step = saved;
  });
}

}  // extern "C"
