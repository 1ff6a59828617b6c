! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
! The Fortran module on 2 ranks (CTest labels fortran and mpi): test_fortran_mpi <folder> cpu|gpu.
! Rank 1 first drifts from the file's parameters (5 SGD steps of its own); an optimiser made with
! comm= brings it back to rank 0's; then 20 Adam steps on different data per rank must leave
! identical parameters on both ranks (the same outputs, bit for bit) and lower the loss. Ranks
! that load different models get an error status on both, never a hang.
program test_fortran_mpi
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use mpi
  use kten
  implicit none
  real(real32), target :: x(4, 8), yref(2, 8), target(2, 8), out(2, 8), lo(2, 8), hi(2, 8)
  type(kten_tensor) :: xh, th, xt, tt, pred, loss
  type(kten_model) :: net
  type(kten_optimizer) :: opt
  type(kten_device) :: dev
  character(len=4096) :: folder
  character(len=8) :: mode
  integer :: ierr, rank, unit, i, failures
  real(real64) :: loss0, loss1

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, folder)
  call get_command_argument(2, mode)
  dev = kten_cpu()
  if (mode == "gpu") dev = kten_gpu(0)
  call kten_init()
  failures = 0
  open(newunit=unit, file=trim(folder) // "/mlp-ref.bin", access="stream", form="unformatted", status="old")
  read(unit) x, yref
  close(unit)
  x = x * (1 + rank)                       ! each rank its own data
  target(1, :) = x(1, :) * x(2, :)
  target(2, :) = sin(x(3, :)) - x(4, :)
  call kten_model_load(net, trim(folder) // "/mlp.onnx", dev)
  call kten_tensor_from_array(xh, x, kten_cpu())
  call kten_tensor_from_array(th, target, kten_cpu())
  call kten_tensor_to(xt, xh, dev)
  call kten_tensor_to(tt, th, dev)
  if (rank == 1) then                      ! drift away from the file's parameters
    call kten_optimizer_sgd(opt, net, 0.1_real64)
    do i = 1, 5
      call train_step()
    end do
  end if
  call kten_optimizer_adam(opt, net, 1.0e-2_real64, comm=MPI_COMM_WORLD)
  call kten_model_forward(net, xt, pred)
  call compare("after comm=, both ranks have rank 0's parameters")
  do i = 1, 20
    call train_step()
    if (i == 1) loss0 = kten_tensor_item(loss)
  end do
  call kten_model_forward(net, xt, pred)
  call kten_mse_loss(loss, pred, tt)
  loss1 = kten_tensor_item(loss)
  call compare("after 20 data-parallel Adam steps, identical parameters on both ranks")
  if (.not. loss1 < loss0) then
    print '(a, i0)', "FAILED: the loss did not fall on rank ", rank
    failures = failures + 1
  end if
  print '(a, i0, a, es10.3, a, es10.3)', "rank ", rank, ": loss ", loss0, " -> ", loss1
  call mismatched_models()
  call kten_free(xh); call kten_free(th); call kten_free(xt); call kten_free(tt)
  call kten_free(pred); call kten_free(loss); call kten_free(opt); call kten_free(net)
  call kten_finalize()
  call MPI_Allreduce(MPI_IN_PLACE, failures, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. failures == 0) print '(a)', "passed: 0 failures on 2 ranks"
  call MPI_Finalize(ierr)
  if (failures > 0) error stop 1

contains

  subroutine train_step()
    call kten_model_forward(net, xt, pred)
    call kten_mse_loss(loss, pred, tt)
    call kten_optimizer_zero_grad(opt)
    call kten_backward(loss)
    call kten_optimizer_step(opt)
  end subroutine

  ! Rank 1 loads a model with one more layer (its first parameters of the same shapes): making the
  ! data-parallel optimiser must fail on both ranks with a status, never leave rank 1 waiting in a
  ! broadcast that rank 0 never makes.
  subroutine mismatched_models()
    type(kten_model) :: other
    type(kten_optimizer) :: other_opt
    integer :: st
    character(len=512) :: msg
    if (rank == 0) call kten_model_load(other, trim(folder) // "/mlp.onnx", dev)
    if (rank == 1) call kten_model_load(other, trim(folder) // "/mlp-longer.onnx", dev)
    msg = ""
    call kten_optimizer_sgd(other_opt, other, 0.1_real64, comm=MPI_COMM_WORLD, stat=st, errmsg=msg)
    if (st == 0 .or. index(msg, "the ranks' models differ") == 0) then
      print '(a, i0, 3a, i0)', "FAILED: mismatched models were not refused on rank ", rank, ": '", trim(msg), "', stat ", st
      failures = failures + 1
    end if
    call kten_free(other_opt); call kten_free(other)
  end subroutine

  ! The model's outputs on rank 0's data, the same on every rank (min == max over the ranks).
  subroutine compare(what)
    character(len=*), intent(in) :: what
    type(kten_tensor) :: x0h, x0, p0
    real(real32), target :: x0_array(4, 8)
    x0_array = x / (1 + rank)
    call kten_tensor_from_array(x0h, x0_array, kten_cpu())
    call kten_tensor_to(x0, x0h, dev)
    call kten_model_forward(net, x0, p0)
    call kten_tensor_to_array(p0, out)
    call MPI_Allreduce(out, lo, size(out), MPI_REAL, MPI_MIN, MPI_COMM_WORLD, ierr)
    call MPI_Allreduce(out, hi, size(out), MPI_REAL, MPI_MAX, MPI_COMM_WORLD, ierr)
    if (any(lo /= hi)) then
      print '(3a, i0)', "FAILED: ", what, " on rank ", rank
      failures = failures + 1
    end if
    call kten_free(x0h); call kten_free(x0); call kten_free(p0)
  end subroutine

end program test_fortran_mpi
