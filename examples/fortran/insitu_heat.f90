! SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
! A 2-D heat solver that trains a neural surrogate of its own time step, in place (docs/fortran.md).
!   insitu_heat <heat_mlp.onnx> <trained.onnx> [cpu|gpu]
! The solver advances u(nx, ny) with the explicit five-point stencil. Every K steps it writes each
! interior point's stencil into stencil(5, npoints) and the next temperature into next(1, npoints):
! arrays that kten wrapped once, without a copy (features first, batch last in Fortran is the
! tensor (npoints, 5), batch first, as PyTorch's). The MLP that PyTorch exported (make_heat_mlp.py)
! then takes a few Adam steps on them, and the program reports the surrogate's error on the step it
! has not seen yet. At the end it saves the trained model as ONNX and exits 1 unless the error fell.
program insitu_heat
  use, intrinsic :: iso_fortran_env, only: real32, real64, int64
  use kten
  implicit none
  integer, parameter :: nx = 48, ny = 48, npoints = (nx - 2) * (ny - 2)
  integer, parameter :: steps = 240, every = 40, adam_steps = 40
  real(real32), parameter :: alpha = 0.2
  real(real32), target :: u(nx, ny), stencil(5, npoints), next(1, npoints), pred(1, npoints)
  type(kten_device) :: dev
  type(kten_model) :: net
  type(kten_optimizer) :: opt
  type(kten_tensor) :: x, y, xd, yd, out, loss
  character(len=1024) :: model_in, model_out, device_name
  real(real64) :: first_error, error
  integer :: step, i, j

  call get_command_argument(1, model_in)
  call get_command_argument(2, model_out)
  call get_command_argument(3, device_name)
  dev = kten_cpu()
  if (device_name == "gpu") dev = kten_gpu(0)

  call kten_init()
  call kten_model_load(net, trim(model_in), dev)
  call kten_optimizer_adam(opt, net, 1.0e-2_real64)
  call kten_tensor_from_array(x, stencil, kten_cpu())   ! the tensor (npoints, 5), no copy
  call kten_tensor_from_array(y, next, kten_cpu())      ! (npoints, 1)

  ! a hot square in a cold plate, borders held at 0
  u = 0
  u(nx / 4:nx / 2, ny / 3:2 * ny / 3) = 1
  first_error = -1
  do step = 1, steps
    if (mod(step, every) == 0) then
      call gather_stencils()
      call advance()
      call gather_next()
      ! on a GPU the solver's arrays would be there already (OpenACC host_data); here they move explicitly
      call kten_tensor_to(xd, x, dev)
      call kten_tensor_to(yd, y, dev)
      call kten_model_forward(net, xd, out)            ! the surrogate on a step it has not seen
      call kten_tensor_to_array(out, pred)
      error = sqrt(sum(real(pred - next, real64)**2) / npoints) / maxval(abs(u))
      if (first_error < 0) first_error = error
      print '(a, i4, a, es10.3)', "step ", step, ": surrogate's relative RMS error ", error
      do i = 1, adam_steps                             ! then it learns from it
        call kten_model_forward(net, xd, out)
        call kten_mse_loss(loss, out, yd)
        call kten_optimizer_zero_grad(opt)
        call kten_backward(loss)
        call kten_optimizer_step(opt)
      end do
    else
      call advance()
    end if
  end do
  call kten_model_save(net, trim(model_out))
  print '(a, a)', "saved the trained surrogate to ", trim(model_out)
  call kten_free(x); call kten_free(y); call kten_free(xd); call kten_free(yd)
  call kten_free(out); call kten_free(loss); call kten_free(opt); call kten_free(net)
  call kten_finalize()
  if (.not. error < 0.5_real64 * first_error) then
    print '(a)', "FAILED: the surrogate's error did not halve"
    error stop 1
  end if
  print '(a, es10.3, a, es10.3)', "surrogate's error ", first_error, " -> ", error

contains

  subroutine advance()
    real(real32) :: lap(2:nx - 1, 2:ny - 1)
    lap = u(1:nx - 2, 2:ny - 1) + u(3:nx, 2:ny - 1) + u(2:nx - 1, 1:ny - 2) + u(2:nx - 1, 3:ny) - 4 * u(2:nx - 1, 2:ny - 1)
    u(2:nx - 1, 2:ny - 1) = u(2:nx - 1, 2:ny - 1) + alpha * lap
  end subroutine

  subroutine gather_stencils()
    integer :: p
    p = 0
    do j = 2, ny - 1
      do i = 2, nx - 1
        p = p + 1
        stencil(:, p) = [u(i, j), u(i - 1, j), u(i + 1, j), u(i, j - 1), u(i, j + 1)]
      end do
    end do
  end subroutine

  subroutine gather_next()
    next(1, :) = reshape(u(2:nx - 1, 2:ny - 1), [npoints])
  end subroutine

end program insitu_heat
