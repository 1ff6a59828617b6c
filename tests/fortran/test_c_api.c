// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The C API from plain C99 (CTest label fortran): test_c_api <folder of make_mlp.py's files> cpu|gpu.
 * Exits 0 when every check passes, else prints each failure and exits 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kten/kten.h>

static int failures = 0;

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      printf("FAILED line %d: %s (last error: %s)\n", __LINE__, #cond, kten_last_error()); \
      ++failures;                                                                   \
    }                                                                               \
  } while (0)
#define OK(call) CHECK((call) == KTEN_OK)

static void read_reference(const char* folder, float x[8][4], float y[8][2]) {
  char path[4096];
  snprintf(path, sizeof path, "%s/mlp-ref.bin", folder);
  FILE* f = fopen(path, "rb");
  if (!f || fread(x, sizeof(float), 32, f) != 32 || fread(y, sizeof(float), 16, f) != 16) {
    printf("cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
}

/* The largest difference between the tensor (copied out as float32 (8, 2)) and `want`. */
static double max_diff(kten_tensor t, float want[8][2]) {
  float got[8][2];
  const int64_t shape[2] = {8, 2};
  if (kten_tensor_copy_to(t, got, KTEN_FLOAT32, 2, shape, NULL, kten_cpu()) != KTEN_OK) return INFINITY;
  double worst = 0;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 2; ++j) worst = fmax(worst, fabs((double)got[i][j] - want[i][j]));
  return worst;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    printf("usage: test_c_api <folder> cpu|gpu\n");
    return 2;
  }
  const char* folder = argv[1];
  const int on_gpu = strcmp(argv[2], "gpu") == 0;
  OK(kten_init());
  const kten_device dev = on_gpu ? kten_gpu(0) : kten_cpu();
  const int64_t live_at_start = kten_live_handles();

  /* Wrapping: no copy (a write to the buffer shows), strides in elements, copy out. */
  {
    double a[2][3] = {{1, 2, 3}, {4, 5, 6}};
    const int64_t shape[2] = {2, 3}, tshape[2] = {3, 2}, tstrides[2] = {1, 3};
    kten_tensor t = NULL, tt = NULL;
    OK(kten_tensor_wrap(&t, a, KTEN_FLOAT64, 2, shape, NULL, kten_cpu()));
    void* data = NULL;
    OK(kten_tensor_data(t, &data));
    CHECK(data == (void*)a);
    a[1][2] = 60;
    double out[2][3];
    OK(kten_tensor_copy_to(t, out, KTEN_FLOAT64, 2, shape, NULL, kten_cpu()));
    CHECK(out[1][2] == 60 && out[0][1] == 2);
    OK(kten_tensor_wrap(&tt, a, KTEN_FLOAT64, 2, tshape, tstrides, kten_cpu())); /* the transpose, in place */
    double at[3][2];
    OK(kten_tensor_copy_to(tt, at, KTEN_FLOAT64, 2, tshape, NULL, kten_cpu()));
    CHECK(at[2][1] == 60 && at[1][0] == 2 && at[0][1] == 4);
    int32_t ndim = 0;
    int64_t got_shape[5] = {0};
    kten_dtype dtype = KTEN_INT64;
    OK(kten_tensor_ndim(tt, &ndim));
    OK(kten_tensor_shape(tt, got_shape));
    OK(kten_tensor_dtype(tt, &dtype));
    CHECK(ndim == 2 && got_shape[0] == 3 && got_shape[1] == 2 && dtype == KTEN_FLOAT64);
    int64_t idx[5] = {1, 2, 3, 4, 5};
    const int64_t five[5] = {1, 1, 1, 1, 5};
    OK(kten_tensor_wrap(&t, idx, KTEN_INT64, 5, five, NULL, kten_cpu())); /* re-wrap: releases the old one */
    int64_t idx_out[5];
    OK(kten_tensor_copy_to(t, idx_out, KTEN_INT64, 5, five, NULL, kten_cpu()));
    CHECK(idx_out[4] == 5);
    OK(kten_tensor_free(&t));
    OK(kten_tensor_free(&t)); /* twice: fine */
    CHECK(t == NULL);
    OK(kten_tensor_free(&tt));
  }

  /* Refusals: each kten error class has its code, and the message says what was wrong. */
  {
    kten_tensor t = NULL, u = NULL, loss = NULL;
    float buf[6] = {0};
    const int64_t shape[2] = {2, 3}, other[2] = {3, 2}, bad_rank[6] = {1, 1, 1, 1, 1, 6};
    CHECK(kten_tensor_item(NULL, NULL) == KTEN_INVALID_ARGUMENT);
    CHECK(kten_tensor_wrap(&t, buf, KTEN_FLOAT32, 6, bad_rank, NULL, kten_cpu()) == KTEN_INVALID_ARGUMENT);
    CHECK(strstr(kten_last_error(), "dimensions") != NULL);
    CHECK(kten_tensor_wrap(&t, buf, KTEN_FLOAT32, 2, shape, NULL, kten_gpu(7)) == KTEN_DEVICE_UNAVAILABLE);
    CHECK(strlen(kten_last_error()) > 0);
    CHECK(t == NULL);
    OK(kten_tensor_wrap(&t, buf, KTEN_FLOAT32, 2, shape, NULL, kten_cpu()));
    OK(kten_tensor_wrap(&u, buf, KTEN_FLOAT32, 2, other, NULL, kten_cpu()));
    CHECK(kten_mse_loss(&loss, t, u) == KTEN_SHAPE_ERROR);
    double v = 0;
    CHECK(kten_tensor_item(t, &v) != KTEN_OK);
    kten_model m = NULL;
    CHECK(kten_model_load(&m, "/nonexistent/model.onnx", kten_cpu()) == KTEN_FORMAT_ERROR);
    CHECK(strstr(kten_last_error(), "nonexistent") != NULL);
    OK(kten_tensor_free(&t));
    OK(kten_tensor_free(&u));
  }

  /* Device memory kten allocated, wrapped in place on its device. */
  if (on_gpu) {
    kten_tensor z = NULL, w = NULL;
    const int64_t shape[1] = {4};
    OK(kten_tensor_zeros(&z, KTEN_FLOAT32, 1, shape, kten_gpu(0)));
    void* p = NULL;
    OK(kten_tensor_data(z, &p));
    OK(kten_tensor_wrap(&w, p, KTEN_FLOAT32, 1, shape, NULL, kten_gpu(0)));
    kten_device where = kten_cpu();
    OK(kten_tensor_device(w, &where));
    CHECK(where.kind == 1 && where.index == 0);
    float host[4] = {1, 1, 1, 1};
    OK(kten_tensor_copy_to(w, host, KTEN_FLOAT32, 1, shape, NULL, kten_cpu()));
    CHECK(host[0] == 0 && host[3] == 0);
    /* The wrong device is refused, where the runtime can tell: device memory on cpu() always (an
       emulated GPU's trapped memory too), host memory on a real GPU (emulated ones may wrap it). */
    kten_tensor wrong = NULL;
    CHECK(kten_tensor_wrap(&wrong, p, KTEN_FLOAT32, 1, shape, NULL, kten_cpu()) == KTEN_DEVICE_MISMATCH);
    CHECK(strstr(kten_last_error(), "GPU memory") != NULL);
    const char* emulated = getenv("KTEN_EMULATE_GPUS");
    if (!emulated || strcmp(emulated, "1") != 0) {
      CHECK(kten_tensor_wrap(&wrong, host, KTEN_FLOAT32, 1, shape, NULL, kten_gpu(0)) == KTEN_DEVICE_MISMATCH);
      CHECK(strstr(kten_last_error(), "host memory") != NULL);
    }
    CHECK(wrong == NULL);
    OK(kten_tensor_free(&z));
    OK(kten_tensor_free(&w));
  }

  /* PyTorch's MLP: its outputs, 200 Adam steps, SGD, cross entropy, ONNX and checkpoint round trips. */
  {
    float x[8][4], y[8][2], target[8][2];
    read_reference(folder, x, y);
    for (int i = 0; i < 8; ++i) {
      target[i][0] = x[i][0] * x[i][1];
      target[i][1] = sinf(x[i][2]) - x[i][3];
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/mlp.onnx", folder);
    kten_model net = NULL, again = NULL;
    OK(kten_model_load(&net, path, dev));
    const int64_t xs[2] = {8, 4}, ys[2] = {8, 2};
    kten_tensor xh = NULL, th = NULL, xt = NULL, tt = NULL, pred = NULL, loss = NULL;
    OK(kten_tensor_wrap(&xh, x, KTEN_FLOAT32, 2, xs, NULL, kten_cpu()));
    OK(kten_tensor_wrap(&th, target, KTEN_FLOAT32, 2, ys, NULL, kten_cpu()));
    OK(kten_tensor_to(&xt, xh, dev));
    OK(kten_tensor_to(&tt, th, dev));
    if (on_gpu) CHECK(kten_model_forward(net, xh, &pred) == KTEN_DEVICE_MISMATCH);
    OK(kten_model_forward(net, xt, &pred));
    const double first = max_diff(pred, y);
    printf("PyTorch's outputs: largest difference %.3g\n", first);
    CHECK(first <= 1e-5);

    kten_optimizer opt = NULL;
    OK(kten_optimizer_adam(&opt, net, 1e-2));
    double loss0 = 0, loss_end = 0;
    for (int step = 0; step < 200; ++step) {
      OK(kten_model_forward(net, xt, &pred));
      OK(kten_mse_loss(&loss, pred, tt));
      if (step == 0) OK(kten_tensor_item(loss, &loss0));
      OK(kten_optimizer_zero_grad(opt));
      OK(kten_backward(loss));
      OK(kten_optimizer_step(opt));
    }
    OK(kten_model_forward(net, xt, &pred));
    OK(kten_mse_loss(&loss, pred, tt));
    OK(kten_tensor_item(loss, &loss_end));
    printf("Adam: loss %.4g -> %.4g after 200 steps\n", loss0, loss_end);
    CHECK(loss_end < 0.5 * loss0);

    /* Checkpoint: save, step on, restore: the outputs are the saved model's again. */
    float saved_out[8][2];
    OK(kten_tensor_copy_to(pred, saved_out, KTEN_FLOAT32, 2, ys, NULL, kten_cpu()));
    char ckpt[4096];
    snprintf(ckpt, sizeof ckpt, "%s/c-%s.ckpt", folder, argv[2]);
    OK(kten_checkpoint_save(ckpt, net, opt, 200));
    for (int step = 0; step < 3; ++step) {
      OK(kten_model_forward(net, xt, &pred));
      OK(kten_mse_loss(&loss, pred, tt));
      OK(kten_optimizer_zero_grad(opt));
      OK(kten_backward(loss));
      OK(kten_optimizer_step(opt));
    }
    int64_t step = 0;
    OK(kten_checkpoint_load(ckpt, net, opt, &step));
    OK(kten_model_forward(net, xt, &pred));
    CHECK(step == 200);
    CHECK(max_diff(pred, saved_out) == 0);

    /* ONNX: save the trained model, load it back, same outputs. */
    char saved[4096];
    snprintf(saved, sizeof saved, "%s/c-trained-%s.onnx", folder, argv[2]);
    OK(kten_model_save(net, saved));
    OK(kten_model_load(&again, saved, dev));
    kten_tensor pred2 = NULL;
    OK(kten_model_forward(again, xt, &pred2));
    CHECK(max_diff(pred2, saved_out) <= 1e-6);

    /* SGD and cross entropy: classes 0/1 from the sign of x0. */
    int64_t classes[8];
    for (int i = 0; i < 8; ++i) classes[i] = x[i][0] > 0;
    const int64_t cs[1] = {8};
    kten_tensor ch = NULL, ct = NULL;
    OK(kten_tensor_wrap(&ch, classes, KTEN_INT64, 1, cs, NULL, kten_cpu()));
    OK(kten_tensor_to(&ct, ch, dev));
    OK(kten_optimizer_sgd(&opt, again, 0.1)); /* replaces the Adam handle */
    double ce0 = 0, ce_end = 0;
    for (int s = 0; s < 20; ++s) {
      OK(kten_model_forward(again, xt, &pred2));
      OK(kten_cross_entropy_loss(&loss, pred2, ct));
      if (s == 0) OK(kten_tensor_item(loss, &ce0));
      OK(kten_optimizer_zero_grad(opt));
      OK(kten_backward(loss));
      OK(kten_optimizer_step(opt));
    }
    OK(kten_model_forward(again, xt, &pred2));
    OK(kten_cross_entropy_loss(&loss, pred2, ct));
    OK(kten_tensor_item(loss, &ce_end));
    printf("SGD on cross entropy: %.4g -> %.4g after 20 steps\n", ce0, ce_end);
    CHECK(ce_end < ce0);

    /* Re-wrapping in a loop keeps nothing alive. */
    const int64_t before = kten_live_handles();
    for (int i = 0; i < 10000; ++i) OK(kten_tensor_wrap(&xh, x, KTEN_FLOAT32, 2, xs, NULL, kten_cpu()));
    CHECK(kten_live_handles() == before);

    kten_tensor* tensors[] = {&xh, &th, &xt, &tt, &pred, &pred2, &loss, &ch, &ct};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; ++i) OK(kten_tensor_free(tensors[i]));
    OK(kten_optimizer_free(&opt));
    OK(kten_optimizer_free(&opt));
    OK(kten_model_free(&net));
    OK(kten_model_free(&again));
    OK(kten_model_free(&again));
  }
  printf("live handles at the end: %lld (at the start %lld)\n", (long long)kten_live_handles(),
         (long long)live_at_start);
  CHECK(kten_live_handles() == live_at_start);
  OK(kten_finalize());
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
