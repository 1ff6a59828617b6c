! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
!> \brief The Fortran 2018 module `kten` (DESIGN.md 1c, docs/fortran.md): tensors over Fortran
!> arrays without a copy, ONNX models that run and train, optimisers and checkpoints, on top of the
!> C API (<kten/kten.h>). Only iso_c_binding and iso_fortran_env appear in its interface; handles
!> are opaque. Every routine takes optional `stat` (0 on success, else a KTEN_* code) and `errmsg`;
!> without `stat` an error prints kten's message and stops the program (error stop).
module kten
  use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_associated, c_loc, c_f_pointer, c_char, &
                                         c_null_char, c_int32_t, c_int64_t, c_double, c_size_t
  use, intrinsic :: iso_fortran_env, only: real32, real64, int64
  implicit none
  private

  !> \brief Status codes, as <kten/kten.h>'s: one per kten error class.
  integer, parameter, public :: KTEN_OK = 0, KTEN_ERROR = 1, KTEN_DEVICE_UNAVAILABLE = 2, &
    KTEN_DEVICE_MISMATCH = 3, KTEN_SHAPE_ERROR = 4, KTEN_DTYPE_ERROR = 5, KTEN_INDEX_ERROR = 6, &
    KTEN_OUT_OF_MEMORY = 7, KTEN_FORMAT_ERROR = 8, KTEN_SYNC_ERROR = 9, KTEN_THREAD_ERROR = 10, &
    KTEN_INVALID_ARGUMENT = 11, KTEN_INTERNAL_ERROR = 12

  integer(c_int32_t), parameter :: FLOAT32 = 0, FLOAT64 = 1, INT64_DTYPE = 2
  integer, parameter :: MAX_RANK = 5

  !> \brief A device: kten_cpu() or kten_gpu(i).
  type, public :: kten_device
    private
    integer(c_int32_t) :: kind = 0
    integer(c_int32_t) :: index = 0
  end type

  type, bind(c) :: c_device
    integer(c_int32_t) :: kind, index
  end type

  !> \brief A tensor handle (reference counted; assignment shares the tensor).
  type, public :: kten_tensor
    private
    type(c_ptr) :: h = c_null_ptr
  contains
    procedure, private :: tensor_assign
    generic :: assignment(=) => tensor_assign
    final :: tensor_final
  end type

  !> \brief A model handle: an ONNX graph loaded by kten_model_load.
  type, public :: kten_model
    private
    type(c_ptr) :: h = c_null_ptr
  contains
    procedure, private :: model_assign
    generic :: assignment(=) => model_assign
    final :: model_final
  end type

  !> \brief An optimiser handle bound to one model.
  type, public :: kten_optimizer
    private
    type(c_ptr) :: h = c_null_ptr
  contains
    procedure, private :: optimizer_assign
    generic :: assignment(=) => optimizer_assign
    final :: optimizer_final
  end type

  public :: kten_init, kten_finalize, kten_cpu, kten_gpu, kten_num_gpus, kten_live_handles
  public :: kten_tensor_from_array, kten_tensor_to_array, kten_tensor_to, kten_tensor_item, kten_tensor_requires_grad
  public :: kten_model_load, kten_model_forward, kten_model_train, kten_model_save
  public :: kten_mse_loss, kten_cross_entropy_loss, kten_backward
  public :: kten_optimizer_adam, kten_optimizer_sgd, kten_optimizer_zero_grad, kten_optimizer_step
  public :: kten_checkpoint_save, kten_checkpoint_load, kten_free

  !> \brief Wraps a real32, real64 or int64 array of rank 1 to 5 as a tensor, without a copy.
  interface kten_tensor_from_array
    module procedure from_array_real32, from_array_real64, from_array_int64
  end interface

  !> \brief Copies a tensor into a real32, real64 or int64 array (the same dimension rule).
  interface kten_tensor_to_array
    module procedure to_array_real32, to_array_real64, to_array_int64
  end interface

  !> \brief Releases a tensor, model or optimiser handle; safe on a released one.
  interface kten_free
    module procedure free_tensor, free_model, free_optimizer
  end interface

  interface
    function c_last_error() bind(c, name="kten_last_error")
      import :: c_ptr
      type(c_ptr) :: c_last_error
    end function
    function c_strlen(s) bind(c, name="strlen")
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function
    function c_init() bind(c, name="kten_init")
      import :: c_int32_t
      integer(c_int32_t) :: c_init
    end function
    function c_finalize() bind(c, name="kten_finalize")
      import :: c_int32_t
      integer(c_int32_t) :: c_finalize
    end function
    function c_num_gpus(n) bind(c, name="kten_num_gpus")
      import :: c_int32_t
      integer(c_int32_t), intent(out) :: n
      integer(c_int32_t) :: c_num_gpus
    end function
    function c_live_handles() bind(c, name="kten_live_handles")
      import :: c_int64_t
      integer(c_int64_t) :: c_live_handles
    end function
    function c_tensor_wrap(out, data, dtype, ndim, shape, strides, device) bind(c, name="kten_tensor_wrap")
      import :: c_ptr, c_int32_t, c_int64_t, c_device
      type(c_ptr), intent(inout) :: out
      type(c_ptr), value :: data
      integer(c_int32_t), value :: dtype, ndim
      integer(c_int64_t), intent(in) :: shape(*)
      type(c_ptr), value :: strides
      type(c_device), value :: device
      integer(c_int32_t) :: c_tensor_wrap
    end function
    function c_tensor_copy_to(t, data, dtype, ndim, shape, strides, device) bind(c, name="kten_tensor_copy_to")
      import :: c_ptr, c_int32_t, c_int64_t, c_device
      type(c_ptr), value :: t, data
      integer(c_int32_t), value :: dtype, ndim
      integer(c_int64_t), intent(in) :: shape(*)
      type(c_ptr), value :: strides
      type(c_device), value :: device
      integer(c_int32_t) :: c_tensor_copy_to
    end function
    function c_tensor_to(out, t, device) bind(c, name="kten_tensor_to")
      import :: c_ptr, c_int32_t, c_device
      type(c_ptr), intent(inout) :: out
      type(c_ptr), value :: t
      type(c_device), value :: device
      integer(c_int32_t) :: c_tensor_to
    end function
    function c_tensor_item(t, v) bind(c, name="kten_tensor_item")
      import :: c_ptr, c_int32_t, c_double
      type(c_ptr), value :: t
      real(c_double), intent(out) :: v
      integer(c_int32_t) :: c_tensor_item
    end function
    function c_tensor_requires_grad(t, on) bind(c, name="kten_tensor_requires_grad")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: t
      integer(c_int32_t), value :: on
      integer(c_int32_t) :: c_tensor_requires_grad
    end function
    function c_tensor_retain(h) bind(c, name="kten_tensor_retain")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: h
      integer(c_int32_t) :: c_tensor_retain
    end function
    function c_model_retain(h) bind(c, name="kten_model_retain")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: h
      integer(c_int32_t) :: c_model_retain
    end function
    function c_optimizer_retain(h) bind(c, name="kten_optimizer_retain")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: h
      integer(c_int32_t) :: c_optimizer_retain
    end function
    function c_tensor_free(h) bind(c, name="kten_tensor_free")
      import :: c_ptr, c_int32_t
      type(c_ptr), intent(inout) :: h
      integer(c_int32_t) :: c_tensor_free
    end function
    function c_model_free(h) bind(c, name="kten_model_free")
      import :: c_ptr, c_int32_t
      type(c_ptr), intent(inout) :: h
      integer(c_int32_t) :: c_model_free
    end function
    function c_optimizer_free(h) bind(c, name="kten_optimizer_free")
      import :: c_ptr, c_int32_t
      type(c_ptr), intent(inout) :: h
      integer(c_int32_t) :: c_optimizer_free
    end function
    function c_model_load(out, path, device) bind(c, name="kten_model_load")
      import :: c_ptr, c_int32_t, c_char, c_device
      type(c_ptr), intent(inout) :: out
      character(kind=c_char), intent(in) :: path(*)
      type(c_device), value :: device
      integer(c_int32_t) :: c_model_load
    end function
    function c_model_forward(m, x, out) bind(c, name="kten_model_forward")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: m, x
      type(c_ptr), intent(inout) :: out
      integer(c_int32_t) :: c_model_forward
    end function
    function c_model_train(m, on) bind(c, name="kten_model_train")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: m
      integer(c_int32_t), value :: on
      integer(c_int32_t) :: c_model_train
    end function
    function c_model_save(m, path) bind(c, name="kten_model_save")
      import :: c_ptr, c_int32_t, c_char
      type(c_ptr), value :: m
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int32_t) :: c_model_save
    end function
    function c_mse_loss(out, p, t) bind(c, name="kten_mse_loss")
      import :: c_ptr, c_int32_t
      type(c_ptr), intent(inout) :: out
      type(c_ptr), value :: p, t
      integer(c_int32_t) :: c_mse_loss
    end function
    function c_cross_entropy_loss(out, p, t) bind(c, name="kten_cross_entropy_loss")
      import :: c_ptr, c_int32_t
      type(c_ptr), intent(inout) :: out
      type(c_ptr), value :: p, t
      integer(c_int32_t) :: c_cross_entropy_loss
    end function
    function c_backward(t) bind(c, name="kten_backward")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: t
      integer(c_int32_t) :: c_backward
    end function
    function c_optimizer_adam(out, m, lr) bind(c, name="kten_optimizer_adam")
      import :: c_ptr, c_int32_t, c_double
      type(c_ptr), intent(inout) :: out
      type(c_ptr), value :: m
      real(c_double), value :: lr
      integer(c_int32_t) :: c_optimizer_adam
    end function
    function c_optimizer_sgd(out, m, lr) bind(c, name="kten_optimizer_sgd")
      import :: c_ptr, c_int32_t, c_double
      type(c_ptr), intent(inout) :: out
      type(c_ptr), value :: m
      real(c_double), value :: lr
      integer(c_int32_t) :: c_optimizer_sgd
    end function
    function c_optimizer_distribute(o, comm) bind(c, name="kten_optimizer_distribute")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: o
      integer(c_int32_t), value :: comm
      integer(c_int32_t) :: c_optimizer_distribute
    end function
    function c_optimizer_zero_grad(o) bind(c, name="kten_optimizer_zero_grad")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: o
      integer(c_int32_t) :: c_optimizer_zero_grad
    end function
    function c_optimizer_step(o) bind(c, name="kten_optimizer_step")
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: o
      integer(c_int32_t) :: c_optimizer_step
    end function
    function c_checkpoint_save(path, m, o, step) bind(c, name="kten_checkpoint_save")
      import :: c_ptr, c_int32_t, c_int64_t, c_char
      character(kind=c_char), intent(in) :: path(*)
      type(c_ptr), value :: m, o
      integer(c_int64_t), value :: step
      integer(c_int32_t) :: c_checkpoint_save
    end function
    function c_checkpoint_load(path, m, o, step) bind(c, name="kten_checkpoint_load")
      import :: c_ptr, c_int32_t, c_int64_t, c_char
      character(kind=c_char), intent(in) :: path(*)
      type(c_ptr), value :: m, o
      integer(c_int64_t), intent(out) :: step
      integer(c_int32_t) :: c_checkpoint_load
    end function
  end interface

contains

  ! kten's message of this thread's last failure.
  function last_error() result(msg)
    character(len=:), allocatable :: msg
    character(kind=c_char), pointer :: chars(:)
    type(c_ptr) :: p
    integer :: i, n
    p = c_last_error()
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: msg)
    do i = 1, n
      msg(i:i) = chars(i)
    end do
  end function

  ! Reports `status`: into stat and errmsg when given, else (on failure) kten's message and error
  ! stop. `msg` is the binding's own message for a refusal made here, before the C API.
  subroutine report(status, stat, errmsg, msg)
    integer(c_int32_t), intent(in) :: status
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    character(len=*), intent(in), optional :: msg
    character(len=:), allocatable :: text
    if (present(stat)) stat = int(status)
    if (status == 0) return
    if (present(msg)) then
      text = msg
    else
      text = last_error()
    end if
    if (present(errmsg)) errmsg = text
    if (.not. present(stat)) error stop text
  end subroutine

  function to_c(device) result(d)
    type(kten_device), intent(in) :: device
    type(c_device) :: d
    d = c_device(device%kind, device%index)
  end function

  function c_string(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len(s) + 1) :: c
    c = s // c_null_char
  end function

  !> \brief Starts Kokkos unless the application did (optional: kten starts it on first use).
  subroutine kten_init(stat, errmsg)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_init(), stat, errmsg)
  end subroutine

  !> \brief Ends what kten_init started; free the handles first.
  subroutine kten_finalize(stat, errmsg)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_finalize(), stat, errmsg)
  end subroutine

  !> \brief The host device.
  pure function kten_cpu() result(d)
    type(kten_device) :: d
    d = kten_device(0, 0)
  end function

  !> \brief GPU number i (0 first): always a value; using a missing GPU is the error.
  pure function kten_gpu(i) result(d)
    integer, intent(in) :: i
    type(kten_device) :: d
    d = kten_device(1, int(i, c_int32_t))
  end function

  !> \brief How many GPUs kten can use (emulated ones included); 0 with a nonzero stat when the
  !> runtime cannot tell (without stat, the error stops the program with kten's message).
  function kten_num_gpus(stat, errmsg) result(n)
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer :: n
    integer(c_int32_t) :: count
    count = 0
    call report(c_num_gpus(count), stat, errmsg)
    n = int(count)
  end function

  !> \brief Handles alive in this process (tensors, models, optimisers): for leak checks.
  function kten_live_handles() result(n)
    integer(int64) :: n
    n = int(c_live_handles(), int64)
  end function

  ! The shared part of kten_tensor_from_array: `data` is the array's first element, `extents` its
  ! shape in Fortran's order.
  subroutine wrap(t, data, dtype, extents, contiguous, device, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(inout) :: t
    type(c_ptr), intent(in) :: data
    integer(c_int32_t), intent(in) :: dtype
    integer(c_int64_t), intent(in) :: extents(:)
    logical, intent(in) :: contiguous
    type(kten_device), intent(in) :: device
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int64_t), target :: shape(MAX_RANK), strides(MAX_RANK)
    integer :: r, d
    logical :: reverse
    r = size(extents)
    if (r < 1 .or. r > MAX_RANK) then
      call report(int(KTEN_INVALID_ARGUMENT, c_int32_t), stat, errmsg, &
                  "kten_tensor_from_array: arrays of rank 1 to 5 wrap, this one has rank " // itoa(r))
      return
    end if
    if (.not. contiguous) then
      call report(int(KTEN_INVALID_ARGUMENT, c_int32_t), stat, errmsg, &
                  "kten_tensor_from_array: the array is not contiguous (a section with a stride, or a "// &
                  "pointer to one), and kten never copies it silently; pass a contiguous array, or copy the "// &
                  "section into one yourself")
      return
    end if
    reverse = .true.
    if (present(reverse_dims)) reverse = reverse_dims
    if (reverse) then  ! u(nx, ny, nb) is the contiguous tensor (nb, ny, nx)
      shape(1:r) = extents(r:1:-1)
      call report(c_tensor_wrap(t%h, data, dtype, int(r, c_int32_t), shape, c_null_ptr, to_c(device)), stat, errmsg)
    else  ! Fortran's order: a strided view, the first axis fastest
      shape(1:r) = extents
      strides(1) = 1
      do d = 2, r
        strides(d) = strides(d - 1) * max(extents(d - 1), 1_c_int64_t)
      end do
      call report(c_tensor_wrap(t%h, data, dtype, int(r, c_int32_t), shape, c_loc(strides), to_c(device)), &
                  stat, errmsg)
    end if
  end subroutine

  ! The shared part of kten_tensor_to_array.
  subroutine copy_out(t, data, dtype, extents, contiguous, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(in) :: t
    type(c_ptr), intent(in) :: data
    integer(c_int32_t), intent(in) :: dtype
    integer(c_int64_t), intent(in) :: extents(:)
    logical, intent(in) :: contiguous
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int64_t), target :: shape(MAX_RANK), strides(MAX_RANK)
    integer :: r, d
    logical :: reverse
    r = size(extents)
    if (r < 1 .or. r > MAX_RANK .or. .not. contiguous) then
      call report(int(KTEN_INVALID_ARGUMENT, c_int32_t), stat, errmsg, &
                  "kten_tensor_to_array: the destination must be a contiguous array of rank 1 to 5")
      return
    end if
    reverse = .true.
    if (present(reverse_dims)) reverse = reverse_dims
    if (reverse) then
      shape(1:r) = extents(r:1:-1)
      call report(c_tensor_copy_to(t%h, data, dtype, int(r, c_int32_t), shape, c_null_ptr, to_c(kten_cpu())), &
                  stat, errmsg)
    else
      shape(1:r) = extents
      strides(1) = 1
      do d = 2, r
        strides(d) = strides(d - 1) * max(extents(d - 1), 1_c_int64_t)
      end do
      call report(c_tensor_copy_to(t%h, data, dtype, int(r, c_int32_t), shape, c_loc(strides), to_c(kten_cpu())), &
                  stat, errmsg)
    end if
  end subroutine

  function itoa(i) result(s)
    integer, intent(in) :: i
    character(len=:), allocatable :: s
    character(len=16) :: buf
    write(buf, '(i0)') i
    s = trim(buf)
  end function

  subroutine from_array_real32(t, a, device, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(inout) :: t
    real(real32), dimension(..), target, intent(inout) :: a
    type(kten_device), intent(in) :: device
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call wrap(t, c_loc(a), FLOAT32, shape(a, c_int64_t), is_contiguous(a), device, reverse_dims, stat, errmsg)
  end subroutine

  subroutine from_array_real64(t, a, device, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(inout) :: t
    real(real64), dimension(..), target, intent(inout) :: a
    type(kten_device), intent(in) :: device
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call wrap(t, c_loc(a), FLOAT64, shape(a, c_int64_t), is_contiguous(a), device, reverse_dims, stat, errmsg)
  end subroutine

  subroutine from_array_int64(t, a, device, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(inout) :: t
    integer(int64), dimension(..), target, intent(inout) :: a
    type(kten_device), intent(in) :: device
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call wrap(t, c_loc(a), INT64_DTYPE, shape(a, c_int64_t), is_contiguous(a), device, reverse_dims, stat, errmsg)
  end subroutine

  subroutine to_array_real32(t, a, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(in) :: t
    real(real32), dimension(..), target, intent(inout) :: a
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call copy_out(t, c_loc(a), FLOAT32, shape(a, c_int64_t), is_contiguous(a), reverse_dims, stat, errmsg)
  end subroutine

  subroutine to_array_real64(t, a, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(in) :: t
    real(real64), dimension(..), target, intent(inout) :: a
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call copy_out(t, c_loc(a), FLOAT64, shape(a, c_int64_t), is_contiguous(a), reverse_dims, stat, errmsg)
  end subroutine

  subroutine to_array_int64(t, a, reverse_dims, stat, errmsg)
    type(kten_tensor), intent(in) :: t
    integer(int64), dimension(..), target, intent(inout) :: a
    logical, intent(in), optional :: reverse_dims
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call copy_out(t, c_loc(a), INT64_DTYPE, shape(a, c_int64_t), is_contiguous(a), reverse_dims, stat, errmsg)
  end subroutine

  !> \brief An explicit copy of `t` on `device` into `out` (`t` itself, shared, when already there).
  subroutine kten_tensor_to(out, t, device, stat, errmsg)
    type(kten_tensor), intent(inout) :: out
    type(kten_tensor), intent(in) :: t
    type(kten_device), intent(in) :: device
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_tensor_to(out%h, t%h, to_c(device)), stat, errmsg)
  end subroutine

  !> \brief The value of a one-element tensor.
  function kten_tensor_item(t, stat, errmsg) result(v)
    type(kten_tensor), intent(in) :: t
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    real(real64) :: v
    real(c_double) :: value
    value = 0
    call report(c_tensor_item(t%h, value), stat, errmsg)
    v = real(value, real64)
  end function

  !> \brief Marks a tensor as a leaf whose gradient kten_backward computes.
  subroutine kten_tensor_requires_grad(t, on, stat, errmsg)
    type(kten_tensor), intent(in) :: t
    logical, intent(in), optional :: on
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: flag
    flag = 1
    if (present(on)) then
      if (.not. on) flag = 0
    end if
    call report(c_tensor_requires_grad(t%h, flag), stat, errmsg)
  end subroutine

  !> \brief Loads an ONNX file onto `device`.
  subroutine kten_model_load(net, path, device, stat, errmsg)
    type(kten_model), intent(inout) :: net
    character(len=*), intent(in) :: path
    type(kten_device), intent(in) :: device
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_model_load(net%h, c_string(path), to_c(device)), stat, errmsg)
  end subroutine

  !> \brief Runs the model: `pred` (released first if it held a tensor) is its output for `x`.
  subroutine kten_model_forward(net, x, pred, stat, errmsg)
    type(kten_model), intent(in) :: net
    type(kten_tensor), intent(in) :: x
    type(kten_tensor), intent(inout) :: pred
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_model_forward(net%h, x%h, pred%h), stat, errmsg)
  end subroutine

  !> \brief Training mode (on, the default) or evaluation mode (on = .false.).
  subroutine kten_model_train(net, on, stat, errmsg)
    type(kten_model), intent(in) :: net
    logical, intent(in), optional :: on
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: flag
    flag = 1
    if (present(on)) then
      if (.not. on) flag = 0
    end if
    call report(c_model_train(net%h, flag), stat, errmsg)
  end subroutine

  !> \brief Writes the model's graph with its current weights as ONNX.
  subroutine kten_model_save(net, path, stat, errmsg)
    type(kten_model), intent(in) :: net
    character(len=*), intent(in) :: path
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_model_save(net%h, c_string(path)), stat, errmsg)
  end subroutine

  !> \brief Mean squared error of `pred` against `target` (PyTorch's MSELoss).
  subroutine kten_mse_loss(loss, pred, target, stat, errmsg)
    type(kten_tensor), intent(inout) :: loss
    type(kten_tensor), intent(in) :: pred, target
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_mse_loss(loss%h, pred%h, target%h), stat, errmsg)
  end subroutine

  !> \brief Cross entropy of logits (N, C) against int64 classes (N), 0-based (CrossEntropyLoss).
  subroutine kten_cross_entropy_loss(loss, logits, target, stat, errmsg)
    type(kten_tensor), intent(inout) :: loss
    type(kten_tensor), intent(in) :: logits, target
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_cross_entropy_loss(loss%h, logits%h, target%h), stat, errmsg)
  end subroutine

  !> \brief Backward from a one-element tensor: gradients accumulate into the parameters.
  subroutine kten_backward(loss, stat, errmsg)
    type(kten_tensor), intent(in) :: loss
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_backward(loss%h), stat, errmsg)
  end subroutine

  !> \brief Adam with PyTorch's defaults (betas 0.9, 0.999, eps 1e-8) on `net`. With `comm` (an MPI
  !> communicator's integer handle, `comm%MPI_VAL` for mpi_f08's type(MPI_Comm); a collective over
  !> it), the model starts from rank 0's parameters and each step averages the gradients over the ranks.
  subroutine kten_optimizer_adam(opt, net, lr, comm, stat, errmsg)
    type(kten_optimizer), intent(inout) :: opt
    type(kten_model), intent(in) :: net
    real(real64), intent(in) :: lr
    integer, intent(in), optional :: comm
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: status
    status = c_optimizer_adam(opt%h, net%h, real(lr, c_double))
    if (status == 0 .and. present(comm)) status = c_optimizer_distribute(opt%h, int(comm, c_int32_t))
    call report(status, stat, errmsg)
  end subroutine

  !> \brief Plain SGD (PyTorch's defaults) on `net`; `comm` as for kten_optimizer_adam.
  subroutine kten_optimizer_sgd(opt, net, lr, comm, stat, errmsg)
    type(kten_optimizer), intent(inout) :: opt
    type(kten_model), intent(in) :: net
    real(real64), intent(in) :: lr
    integer, intent(in), optional :: comm
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: status
    status = c_optimizer_sgd(opt%h, net%h, real(lr, c_double))
    if (status == 0 .and. present(comm)) status = c_optimizer_distribute(opt%h, int(comm, c_int32_t))
    call report(status, stat, errmsg)
  end subroutine

  !> \brief Sets the model's gradients to zero.
  subroutine kten_optimizer_zero_grad(opt, stat, errmsg)
    type(kten_optimizer), intent(in) :: opt
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_optimizer_zero_grad(opt%h), stat, errmsg)
  end subroutine

  !> \brief One update of the model's parameters.
  subroutine kten_optimizer_step(opt, stat, errmsg)
    type(kten_optimizer), intent(in) :: opt
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_optimizer_step(opt%h), stat, errmsg)
  end subroutine

  !> \brief Writes the model's parameters, the optimiser's state and `step` to `path`.
  subroutine kten_checkpoint_save(path, net, opt, step, stat, errmsg)
    character(len=*), intent(in) :: path
    type(kten_model), intent(in) :: net
    type(kten_optimizer), intent(in) :: opt
    integer(int64), intent(in) :: step
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_checkpoint_save(c_string(path), net%h, opt%h, int(step, c_int64_t)), stat, errmsg)
  end subroutine

  !> \brief Restores a checkpoint into `net` and `opt`; `step` (optional) is the step it was saved at.
  subroutine kten_checkpoint_load(path, net, opt, step, stat, errmsg)
    character(len=*), intent(in) :: path
    type(kten_model), intent(in) :: net
    type(kten_optimizer), intent(in) :: opt
    integer(int64), intent(out), optional :: step
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: saved
    saved = 0
    call report(c_checkpoint_load(c_string(path), net%h, opt%h, saved), stat, errmsg)
    if (present(step)) step = int(saved, int64)
  end subroutine

  subroutine free_tensor(t, stat, errmsg)
    type(kten_tensor), intent(inout) :: t
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_tensor_free(t%h), stat, errmsg)
  end subroutine

  subroutine free_model(net, stat, errmsg)
    type(kten_model), intent(inout) :: net
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_model_free(net%h), stat, errmsg)
  end subroutine

  subroutine free_optimizer(opt, stat, errmsg)
    type(kten_optimizer), intent(inout) :: opt
    integer, intent(out), optional :: stat
    character(len=*), intent(inout), optional :: errmsg
    call report(c_optimizer_free(opt%h), stat, errmsg)
  end subroutine

  ! Assignment shares the object: the left side drops what it held, the right side's count goes up.
  subroutine tensor_assign(lhs, rhs)
    class(kten_tensor), intent(inout) :: lhs
    type(kten_tensor), intent(in) :: rhs
    if (c_associated(rhs%h)) call report(c_tensor_retain(rhs%h))
    call report(c_tensor_free(lhs%h))
    lhs%h = rhs%h
  end subroutine

  subroutine model_assign(lhs, rhs)
    class(kten_model), intent(inout) :: lhs
    type(kten_model), intent(in) :: rhs
    if (c_associated(rhs%h)) call report(c_model_retain(rhs%h))
    call report(c_model_free(lhs%h))
    lhs%h = rhs%h
  end subroutine

  subroutine optimizer_assign(lhs, rhs)
    class(kten_optimizer), intent(inout) :: lhs
    type(kten_optimizer), intent(in) :: rhs
    if (c_associated(rhs%h)) call report(c_optimizer_retain(rhs%h))
    call report(c_optimizer_free(lhs%h))
    lhs%h = rhs%h
  end subroutine

  ! Finalizers: release what the handle holds (nothing after kten_free).
  subroutine tensor_final(t)
    type(kten_tensor), intent(inout) :: t
    integer(c_int32_t) :: status
    status = c_tensor_free(t%h)
  end subroutine

  subroutine model_final(net)
    type(kten_model), intent(inout) :: net
    integer(c_int32_t) :: status
    status = c_model_free(net%h)
  end subroutine

  subroutine optimizer_final(opt)
    type(kten_optimizer), intent(inout) :: opt
    integer(c_int32_t) :: status
    status = c_optimizer_free(opt%h)
  end subroutine

end module kten
