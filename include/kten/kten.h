// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/** \file kten.h
 * \brief kten's C API (plain C99): opaque, reference-counted handles for tensors, models and
 * optimisers; devices as small values. Every call returns a kten_status (KTEN_OK, 0, on success);
 * no C++ exception and no exit() crosses it. After a failure, kten_last_error() gives this thread's
 * message. A call that makes a handle takes a pointer to the caller's handle variable: a handle
 * already there (not NULL) is released first, so re-wrapping in a loop keeps nothing alive. Handle
 * variables must start as NULL. Built on the public C++ API only (docs/fortran.md).
 */
#ifndef KTEN_KTEN_H
#define KTEN_KTEN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** \brief A call's outcome: KTEN_OK or the class of the kten exception that ended it. */
typedef int kten_status;

/** \brief The status codes: one per kten error class (include/kten/errors.hpp). */
enum {
  KTEN_OK = 0,                  /**< \brief success */
  KTEN_ERROR = 1,               /**< \brief kten::Error (any other kten error) */
  KTEN_DEVICE_UNAVAILABLE = 2,  /**< \brief kten::DeviceUnavailable */
  KTEN_DEVICE_MISMATCH = 3,     /**< \brief kten::DeviceMismatch */
  KTEN_SHAPE_ERROR = 4,         /**< \brief kten::ShapeError */
  KTEN_DTYPE_ERROR = 5,         /**< \brief kten::DTypeError */
  KTEN_INDEX_ERROR = 6,         /**< \brief kten::IndexError */
  KTEN_OUT_OF_MEMORY = 7,       /**< \brief kten::OutOfMemory (or std::bad_alloc) */
  KTEN_FORMAT_ERROR = 8,        /**< \brief kten::FormatError */
  KTEN_SYNC_ERROR = 9,          /**< \brief kten::SyncError */
  KTEN_THREAD_ERROR = 10,       /**< \brief kten::ThreadError */
  KTEN_INVALID_ARGUMENT = 11,   /**< \brief a NULL handle or pointer, a rank or dtype out of range */
  KTEN_INTERNAL_ERROR = 12      /**< \brief an exception that is no kten::Error (a bug in kten) */
};

/** \brief Element types a tensor can wrap. */
typedef enum { KTEN_FLOAT32 = 0, KTEN_FLOAT64 = 1, KTEN_INT64 = 2 } kten_dtype;

/** \brief A device, a value: kind 0 is the host (cpu()), kind 1 GPU number `index`. */
typedef struct {
  int32_t kind;   /**< \brief 0: cpu, 1: gpu */
  int32_t index;  /**< \brief the GPU ordinal (0 for the cpu) */
} kten_device;

/** \brief Handle of a tensor. */
typedef struct kten_tensor_s* kten_tensor;
/** \brief Handle of a model (an imported ONNX graph). */
typedef struct kten_model_s* kten_model;
/** \brief Handle of an optimiser bound to one model. */
typedef struct kten_optimizer_s* kten_optimizer;

/** \brief The most dimensions a wrapped array may have. */
#define KTEN_MAX_RANK 5

/** \brief The message of this thread's last failed call ("" if none); valid until its next call. */
const char* kten_last_error(void);
/** \brief Starts Kokkos unless the application did (optional: kten starts it on first use). */
kten_status kten_init(void);
/** \brief Ends what kten_init() started; release every handle first. */
kten_status kten_finalize(void);
/** \brief The host device. */
kten_device kten_cpu(void);
/** \brief GPU number `index`: always a value; using a missing GPU is the error. */
kten_device kten_gpu(int32_t index);
/** \brief How many GPUs kten can use (emulated ones included). */
kten_status kten_num_gpus(int32_t* count);
/** \brief Handles alive in this process (tensors, models, optimisers): for leak checks. */
int64_t kten_live_handles(void);

/** \brief Wraps caller memory as a tensor, without a copy: `ndim` (0 to KTEN_MAX_RANK) extents,
 * `strides` in elements (NULL: contiguous, last axis fastest; each >= 0), on `device`, whose
 * memory `data` must be (KTEN_DEVICE_MISMATCH where the GPU runtime says it is not: device
 * memory on kten_cpu(), host memory on a GPU). The memory must outlive the tensor. */
kten_status kten_tensor_wrap(kten_tensor* out, void* data, kten_dtype dtype, int32_t ndim, const int64_t* shape,
                             const int64_t* strides, kten_device device);
/** \brief A tensor of zeros of `shape` on `device`, in kten's own memory. */
kten_status kten_tensor_zeros(kten_tensor* out, kten_dtype dtype, int32_t ndim, const int64_t* shape,
                              kten_device device);
/** \brief Copies the tensor's elements into caller memory laid out as kten_tensor_wrap()'s
 * arguments describe (same shape and dtype; host memory for a cpu device). */
kten_status kten_tensor_copy_to(kten_tensor t, void* data, kten_dtype dtype, int32_t ndim, const int64_t* shape,
                                const int64_t* strides, kten_device device);
/** \brief An explicit copy of `t` on `device` (`t` itself, shared, when already there). */
kten_status kten_tensor_to(kten_tensor* out, kten_tensor t, kten_device device);
/** \brief The number of dimensions. */
kten_status kten_tensor_ndim(kten_tensor t, int32_t* ndim);
/** \brief The extents (ndim of them into `shape`). */
kten_status kten_tensor_shape(kten_tensor t, int64_t* shape);
/** \brief The element type (float32, float64 or int64; a boolean tensor is KTEN_DTYPE_ERROR). */
kten_status kten_tensor_dtype(kten_tensor t, kten_dtype* dtype);
/** \brief The device. */
kten_status kten_tensor_device(kten_tensor t, kten_device* device);
/** \brief The address of the first element, in the device's memory. */
kten_status kten_tensor_data(kten_tensor t, void** data);
/** \brief The value of a one-element tensor, as a double. */
kten_status kten_tensor_item(kten_tensor t, double* value);
/** \brief Marks a tensor as a leaf whose gradient backward() computes. */
kten_status kten_tensor_requires_grad(kten_tensor t, int32_t on);
/** \brief Another reference to the same tensor (the count goes up). */
kten_status kten_tensor_retain(kten_tensor t);
/** \brief Drops this reference and sets *t to NULL; NULL (a second free) is fine. */
kten_status kten_tensor_free(kten_tensor* t);

/** \brief Loads an ONNX file onto `device` (kten::onnx::load). */
kten_status kten_model_load(kten_model* out, const char* path, kten_device device);
/** \brief Runs a one-input, one-output model: *out is the prediction. */
kten_status kten_model_forward(kten_model m, kten_tensor x, kten_tensor* out);
/** \brief Training mode (on = 1) or evaluation mode (on = 0). */
kten_status kten_model_train(kten_model m, int32_t on);
/** \brief Writes the model's graph with its current weights as ONNX (kten::onnx::save). */
kten_status kten_model_save(kten_model m, const char* path);
/** \brief The number of parameter tensors. */
kten_status kten_model_num_parameters(kten_model m, int64_t* count);
/** \brief Parameter `i` (named_parameters()' order) as a tensor sharing its storage. */
kten_status kten_model_parameter(kten_model m, int64_t i, kten_tensor* out);
/** \brief Another reference to the same model. */
kten_status kten_model_retain(kten_model m);
/** \brief Drops this reference and sets *m to NULL; NULL is fine. */
kten_status kten_model_free(kten_model* m);

/** \brief Mean squared error (PyTorch's MSELoss). */
kten_status kten_mse_loss(kten_tensor* out, kten_tensor prediction, kten_tensor target);
/** \brief Cross entropy of logits (N, C) against int64 classes (N) (PyTorch's CrossEntropyLoss). */
kten_status kten_cross_entropy_loss(kten_tensor* out, kten_tensor logits, kten_tensor target);
/** \brief Backward from a one-element tensor: gradients accumulate into the parameters. */
kten_status kten_backward(kten_tensor loss);

/** \brief Adam with PyTorch's defaults (betas 0.9, 0.999, eps 1e-8, no weight decay) on `model`. */
kten_status kten_optimizer_adam(kten_optimizer* out, kten_model model, double lr);
/** \brief Plain SGD (PyTorch's defaults: no momentum, no weight decay) on `model`. */
kten_status kten_optimizer_sgd(kten_optimizer* out, kten_model model, double lr);
/** \brief Makes the optimiser data parallel over the MPI communicator whose Fortran handle is
 * `fortran_comm` (MPI_Comm_c2f(comm) from C; MPI initialised by the application): a collective over
 * it. The model's parameters become rank 0's now, and each step() first averages the gradients
 * over the ranks. KTEN_ERROR in a kten built without MPI. */
kten_status kten_optimizer_distribute(kten_optimizer o, int32_t fortran_comm);
/** \brief Sets the model's gradients to zero. */
kten_status kten_optimizer_zero_grad(kten_optimizer o);
/** \brief One update of the model's parameters. */
kten_status kten_optimizer_step(kten_optimizer o);
/** \brief Another reference to the same optimiser. */
kten_status kten_optimizer_retain(kten_optimizer o);
/** \brief Drops this reference and sets *o to NULL; NULL is fine. */
kten_status kten_optimizer_free(kten_optimizer* o);

/** \brief Writes the model's parameters, the optimiser's state and `step` (kten::save_checkpoint). */
kten_status kten_checkpoint_save(const char* path, kten_model model, kten_optimizer optimizer, int64_t step);
/** \brief Restores a kten_checkpoint_save() file; *step (may be NULL) is the step it was saved at. */
kten_status kten_checkpoint_load(const char* path, kten_model model, kten_optimizer optimizer, int64_t* step);

#ifdef __cplusplus
}
#endif

#endif /* KTEN_KTEN_H */
