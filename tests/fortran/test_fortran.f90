! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
! The Fortran module kten (CTest label fortran):
!   test_fortran <folder of make_mlp.py's files> cpu|gpu   every routine; exits 1 on a failure
!   test_fortran <folder> stop                             an error without stat: kten's message, error stop
program test_fortran
  use, intrinsic :: iso_fortran_env, only: real32, real64, int64
  use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_loc, c_f_pointer, c_int32_t, c_int64_t
  use kten
  implicit none
  ! <kten/kten.h>'s device, for the C calls that stand in for an application's device allocation
  type, bind(c) :: c_device
    integer(c_int32_t) :: kind, index
  end type
  integer :: failures = 0
  character(len=4096) :: folder
  character(len=8) :: mode
  type(kten_device) :: dev
  integer(int64) :: live_at_start

  call get_command_argument(1, folder)
  call get_command_argument(2, mode)
  call kten_init()
  if (mode == "stop") then
    block
      type(kten_model) :: net
      call kten_model_load(net, trim(folder) // "/missing.onnx", kten_cpu())
    end block
  end if
  dev = kten_cpu()
  if (mode == "gpu") dev = kten_gpu(0)
  live_at_start = kten_live_handles()
  block  ! kten_num_gpus takes stat and errmsg as every routine does
    integer :: gpus, st
    character(len=256) :: msg
    msg = ""
    gpus = kten_num_gpus(stat=st, errmsg=msg)
    call check(st == 0 .and. len_trim(msg) == 0, "kten_num_gpus(stat=, errmsg=) succeeds")
    call check(gpus >= merge(1, 0, mode == "gpu"), "kten_num_gpus counts the GPU under test")
  end block

  call test_kinds_and_ranks()
  call test_refusals()
  call test_mlp()
  call test_rewrap()

  print '(a, i0, a, i0)', "live handles at the end: ", kten_live_handles(), ", at the start: ", live_at_start
  call check(kten_live_handles() == live_at_start, "every handle released")
  call kten_finalize()
  if (failures > 0) then
    print '(a, i0, a)', "FAILED: ", failures, " failure(s)"
    error stop 1
  end if
  print '(a)', "passed: 0 failures"

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(2a)', "FAILED: ", what
      failures = failures + 1
    end if
  end subroutine

  ! Every kind, ranks 1 to 5, both dimension orders: wrap, then copy out into a fresh array.
  subroutine test_kinds_and_ranks()
    real(real32), target :: a1(3), b1(3)
    real(real64), target :: a2(2, 3), b2(2, 3), t2(3, 2)
    integer(int64), target :: a3(2, 3, 4), b3(2, 3, 4)
    real(real32), target :: a4(2, 1, 3, 2), b4(2, 1, 3, 2)
    real(real64), target :: a5(2, 2, 1, 3, 2), b5(2, 2, 1, 3, 2)
    integer(int64), target :: i1(4), j1(4)
    type(kten_tensor) :: t
    integer :: i
    a1 = [1.5, 2.5, 3.5]
    a2 = reshape([(real(i, real64), i = 1, 6)], shape(a2))
    a3 = reshape([(int(i, int64), i = 1, 24)], shape(a3))
    a4 = reshape([(real(i, real32), i = 1, 12)], shape(a4))
    a5 = reshape([(real(i, real64) / 4, i = 1, 24)], shape(a5))
    i1 = [7_int64, -3_int64, 0_int64, 9_int64]
    call kten_tensor_from_array(t, a1, kten_cpu())
    call kten_tensor_to_array(t, b1)
    call check(all(a1 == b1), "real32 rank 1")
    call kten_tensor_from_array(t, a2, kten_cpu())
    call kten_tensor_to_array(t, b2)
    call check(all(a2 == b2), "real64 rank 2")
    call kten_tensor_from_array(t, a3, kten_cpu())
    call kten_tensor_to_array(t, b3)
    call check(all(a3 == b3), "int64 rank 3")
    call kten_tensor_from_array(t, a4, kten_cpu(), reverse_dims=.false.)
    call kten_tensor_to_array(t, b4, reverse_dims=.false.)
    call check(all(a4 == b4), "real32 rank 4, Fortran's order")
    call kten_tensor_from_array(t, a5, kten_cpu())
    call kten_tensor_to_array(t, b5)
    call check(all(a5 == b5), "real64 rank 5")
    call kten_tensor_from_array(t, i1, kten_cpu(), reverse_dims=.false.)
    call kten_tensor_to_array(t, j1)
    call check(all(i1 == j1), "int64 rank 1")
    ! a2(2, 3) in Fortran's order is the tensor (2, 3); copied out reversed into t2(3, 2) it is a2's transpose
    call kten_tensor_from_array(t, a2, kten_cpu(), reverse_dims=.false.)
    call kten_tensor_to_array(t, t2)
    call check(all(t2 == transpose(a2)), "a strided view in Fortran's order")
    ! in place: a write through the Fortran array shows in the tensor
    call kten_tensor_from_array(t, a2, kten_cpu())
    a2(2, 3) = 42
    call kten_tensor_to_array(t, b2)
    call check(b2(2, 3) == 42, "a write through the array shows in the tensor")
    call kten_free(t)
    call kten_free(t)
  end subroutine

  subroutine test_refusals()
    real(real32), target :: x(4, 6), y(2, 6), s
    real(real64) :: v
    type(kten_tensor) :: t, u, loss
    type(kten_model) :: net
    integer :: stat
    character(len=512) :: msg
    x = 1
    y = 0
    s = 1
    msg = ""
    call kten_tensor_from_array(t, x(1:4:2, :), kten_cpu(), stat=stat, errmsg=msg)
    call check(stat == KTEN_INVALID_ARGUMENT .and. index(msg, "not contiguous") > 0, "a strided section is refused")
    call kten_tensor_from_array(t, s, kten_cpu(), stat=stat, errmsg=msg)
    call check(stat == KTEN_INVALID_ARGUMENT .and. index(msg, "rank 1 to 5") > 0, "a scalar is refused")
    call kten_tensor_from_array(t, x, kten_gpu(7), stat=stat, errmsg=msg)
    call check(stat == KTEN_DEVICE_UNAVAILABLE .and. len_trim(msg) > 0, "a missing GPU is refused: " // trim(msg))
    call kten_model_load(net, trim(folder) // "/missing.onnx", kten_cpu(), stat=stat, errmsg=msg)
    call check(stat == KTEN_FORMAT_ERROR .and. index(msg, "missing.onnx") > 0, "a missing file: " // trim(msg))
    call kten_tensor_from_array(t, x, kten_cpu())
    call kten_tensor_from_array(u, y, kten_cpu())
    call kten_mse_loss(loss, t, u, stat=stat, errmsg=msg)
    call check(stat == KTEN_SHAPE_ERROR, "mse of (6, 4) and (6, 2): " // trim(msg))
    call kten_tensor_to_array(t, y, stat=stat, errmsg=msg)
    call check(stat == KTEN_SHAPE_ERROR, "copying (6, 4) into (6, 2): " // trim(msg))
    v = kten_tensor_item(t, stat=stat)
    call check(stat /= KTEN_OK, "item of 24 elements")
    call kten_backward(loss, stat=stat, errmsg=msg)
    call check(stat == KTEN_INVALID_ARGUMENT, "backward of an empty handle: " // trim(msg))
    call kten_free(t)
    call kten_free(u)
    call kten_free(net)
  end subroutine

  ! PyTorch's MLP (make_mlp.py): the same outputs, in place, 200 Adam steps, checkpoint, ONNX, SGD.
  subroutine test_mlp()
    real(real32), target :: x(4, 8), yref(2, 8), target(2, 8), out(2, 8), saved(2, 8), xsaved(4, 8)
    integer(int64), target :: classes(8)
    type(kten_tensor) :: xh, th, xt, tt, pred, loss, ch, ct
    type(kten_model) :: net, again
    type(kten_optimizer) :: opt
    real(real64) :: loss0, loss1
    integer(int64) :: step
    integer :: unit, i, stat
    open(newunit=unit, file=trim(folder) // "/mlp-ref.bin", access="stream", form="unformatted", status="old")
    read(unit) x, yref
    close(unit)
    xsaved = x
    target(1, :) = x(1, :) * x(2, :)
    target(2, :) = sin(x(3, :)) - x(4, :)

    call kten_model_load(net, trim(folder) // "/mlp.onnx", dev)
    call kten_tensor_from_array(xh, x, kten_cpu())       ! (8, 4): batch first, as PyTorch's
    call kten_tensor_from_array(th, target, kten_cpu())
    call kten_tensor_to(xt, xh, dev)
    call kten_tensor_to(tt, th, dev)
    if (mode == "gpu") then
      call kten_model_forward(net, xh, pred, stat=stat)
      call check(stat == KTEN_DEVICE_MISMATCH, "a cpu tensor into a gpu model is refused")
      call device_memory_in_place(net, x, yref)
    end if
    call kten_model_forward(net, xt, pred)
    call kten_tensor_to_array(pred, out)
    print '(a, es10.3)', "PyTorch's outputs: largest difference ", maxval(abs(out - yref))
    call check(maxval(abs(out - yref)) <= 1e-5, "the outputs of PyTorch's MLP")

    ! zero copy: change the array, run again (without wrapping again) and see the change
    if (mode /= "gpu") then
      x = 0
      call kten_model_forward(net, xh, pred)
      call kten_tensor_to_array(pred, out)
      call check(maxval(abs(out - yref)) > 1e-3, "zeros in x change the outputs")
      x = xsaved
      call kten_model_forward(net, xh, pred)
      call kten_tensor_to_array(pred, out)
      call check(maxval(abs(out - yref)) <= 1e-5, "x restored in place gives PyTorch's outputs again")
    end if

    call kten_optimizer_adam(opt, net, 1.0e-2_real64)
    do i = 1, 200
      call kten_model_forward(net, xt, pred)
      call kten_mse_loss(loss, pred, tt)
      if (i == 1) loss0 = kten_tensor_item(loss)
      call kten_optimizer_zero_grad(opt)
      call kten_backward(loss)
      call kten_optimizer_step(opt)
    end do
    call kten_model_forward(net, xt, pred)
    call kten_mse_loss(loss, pred, tt)
    loss1 = kten_tensor_item(loss)
    print '(a, es10.3, a, es10.3)', "Adam: loss ", loss0, " -> ", loss1
    call check(loss1 < 0.5_real64 * loss0, "200 Adam steps lower the loss")

    call kten_tensor_to_array(pred, saved)
    call kten_checkpoint_save(trim(folder) // "/f-" // trim(mode) // ".ckpt", net, opt, 200_int64)
    do i = 1, 3
      call kten_model_forward(net, xt, pred)
      call kten_mse_loss(loss, pred, tt)
      call kten_optimizer_zero_grad(opt)
      call kten_backward(loss)
      call kten_optimizer_step(opt)
    end do
    call kten_checkpoint_load(trim(folder) // "/f-" // trim(mode) // ".ckpt", net, opt, step=step)
    call kten_model_forward(net, xt, pred)
    call kten_tensor_to_array(pred, out)
    call check(step == 200 .and. all(out == saved), "a checkpoint round trip")

    call kten_model_save(net, trim(folder) // "/f-trained-" // trim(mode) // ".onnx")
    call kten_model_load(again, trim(folder) // "/f-trained-" // trim(mode) // ".onnx", dev)
    call kten_model_forward(again, xt, pred)
    call kten_tensor_to_array(pred, out)
    call check(maxval(abs(out - saved)) <= 1e-6, "the saved ONNX model gives the trained outputs")

    classes = merge(1_int64, 0_int64, x(1, :) > 0)
    call kten_tensor_from_array(ch, classes, kten_cpu())
    call kten_tensor_to(ct, ch, dev)
    call kten_optimizer_sgd(opt, again, 0.1_real64)
    do i = 1, 20
      call kten_model_forward(again, xt, pred)
      call kten_cross_entropy_loss(loss, pred, ct)
      if (i == 1) loss0 = kten_tensor_item(loss)
      call kten_optimizer_zero_grad(opt)
      call kten_backward(loss)
      call kten_optimizer_step(opt)
    end do
    call kten_model_forward(again, xt, pred)
    call kten_cross_entropy_loss(loss, pred, ct)
    loss1 = kten_tensor_item(loss)
    print '(a, es10.3, a, es10.3)', "SGD on cross entropy: ", loss0, " -> ", loss1
    call check(loss1 < loss0, "SGD lowers the cross entropy")

    call kten_free(xh); call kten_free(th); call kten_free(xt); call kten_free(tt)
    call kten_free(pred); call kten_free(loss); call kten_free(ch); call kten_free(ct)
    call kten_free(opt); call kten_free(opt)
    call kten_free(net); call kten_free(again); call kten_free(again)
  end subroutine

  ! Device memory the application holds (in an OpenACC code, `u` inside `host_data use_device(u)`;
  ! here memory allocated on the GPU through the C API, holding x) wraps in place on kten_gpu(0),
  ! and is refused on kten_cpu(). With trapped emulated memory, any host read of it would crash.
  subroutine device_memory_in_place(net, x, yref)
    type(kten_model), intent(in) :: net
    real(real32), target, intent(in) :: x(4, 8)
    real(real32), intent(in) :: yref(2, 8)
    interface
      function c_tensor_zeros(out, dtype, ndim, shape, device) bind(c, name="kten_tensor_zeros")
        import :: c_ptr, c_int32_t, c_int64_t, c_device
        type(c_ptr), intent(inout) :: out
        integer(c_int32_t), value :: dtype, ndim
        integer(c_int64_t), intent(in) :: shape(*)
        type(c_device), value :: device
        integer(c_int32_t) :: c_tensor_zeros
      end function
      function c_tensor_wrap(out, data, dtype, ndim, shape, strides, device) bind(c, name="kten_tensor_wrap")
        import :: c_ptr, c_int32_t, c_int64_t, c_device
        type(c_ptr), intent(inout) :: out
        type(c_ptr), value :: data, strides
        integer(c_int32_t), value :: dtype, ndim
        integer(c_int64_t), intent(in) :: shape(*)
        type(c_device), value :: device
        integer(c_int32_t) :: c_tensor_wrap
      end function
      function c_tensor_data(t, data) bind(c, name="kten_tensor_data")
        import :: c_ptr, c_int32_t
        type(c_ptr), value :: t
        type(c_ptr), intent(out) :: data
        integer(c_int32_t) :: c_tensor_data
      end function
      function c_tensor_copy_to(t, data, dtype, ndim, shape, strides, device) bind(c, name="kten_tensor_copy_to")
        import :: c_ptr, c_int32_t, c_int64_t, c_device
        type(c_ptr), value :: t, data, strides
        integer(c_int32_t), value :: dtype, ndim
        integer(c_int64_t), intent(in) :: shape(*)
        type(c_device), value :: device
        integer(c_int32_t) :: c_tensor_copy_to
      end function
      function c_tensor_free(t) bind(c, name="kten_tensor_free")
        import :: c_ptr, c_int32_t
        type(c_ptr), intent(inout) :: t
        integer(c_int32_t) :: c_tensor_free
      end function
    end interface
    integer(c_int32_t), parameter :: float32 = 0
    integer(c_int64_t), parameter :: dims(2) = [8_c_int64_t, 4_c_int64_t]
    type(c_ptr) :: allocation, host, data
    real(real32), pointer :: u(:, :)
    real(real32) :: out(2, 8)
    type(kten_tensor) :: t, pred
    integer :: stat
    character(len=512) :: msg
    allocation = c_null_ptr
    host = c_null_ptr
    call check(c_tensor_zeros(allocation, float32, 2, dims, c_device(1, 0)) == KTEN_OK, "device memory")
    call check(c_tensor_data(allocation, data) == KTEN_OK, "its address")
    call check(c_tensor_wrap(host, c_loc(x), float32, 2, dims, c_null_ptr, c_device(0, 0)) == KTEN_OK, "x on the host")
    call check(c_tensor_copy_to(host, data, float32, 2, dims, c_null_ptr, c_device(1, 0)) == KTEN_OK, "x to the GPU")
    call c_f_pointer(data, u, [4, 8])
    call kten_tensor_from_array(t, u, kten_gpu(0))
    call kten_model_forward(net, t, pred)
    call kten_tensor_to_array(pred, out)
    call check(maxval(abs(out - yref)) <= 1e-5, "device memory wrapped in place gives PyTorch's outputs")
    msg = ""
    call kten_tensor_from_array(t, u, kten_cpu(), stat=stat, errmsg=msg)
    call check(stat == KTEN_DEVICE_MISMATCH .and. index(msg, "GPU memory") > 0, "device memory on kten_cpu(): " // trim(msg))
    call kten_free(t)
    call kten_free(pred)
    call check(c_tensor_free(host) == KTEN_OK .and. c_tensor_free(allocation) == KTEN_OK, "released")
  end subroutine

  ! Re-wrapping in a loop keeps nothing alive; assignment shares a handle.
  subroutine test_rewrap()
    real(real64), target :: u(16, 16)
    type(kten_tensor) :: t, shared
    integer(int64) :: before
    integer :: i
    u = 1
    before = kten_live_handles()
    do i = 1, 10000
      call kten_tensor_from_array(t, u, kten_cpu())
    end do
    call check(kten_live_handles() == before + 1, "10000 re-wraps hold one handle")
    shared = t
    call kten_free(t)
    call check(kten_live_handles() == before + 1, "an assigned copy keeps the tensor")
    call kten_free(shared)
    call check(kten_live_handles() == before, "and frees it")
  end subroutine

end program test_fortran
