set terminal pngcairo size 900,560 noenhanced
set grid
set key outside right
set output './gemm.png'
set title 'matmul on cpu(0) (AMD EPYC, AVX-512)'
set xlabel 'n (n x n times n x n)'
set ylabel 'GFLOP/s'
set logscale x 2
plot './gemm.dat' using 1:2 with linespoints title 'kten float32', '' using 1:3 with linespoints title 'OpenBLAS sgemm', '' using 1:4 with linespoints title 'kten float64', '' using 1:5 with linespoints title 'OpenBLAS dgemm', '' using 1:6 with linespoints title 'Eigen float32'
unset logscale x
set output './bandwidth.png'
set title 'memory-bound operations on cpu(0), 2^26 float32'
set ylabel 'GB/s (useful bytes)'
set xlabel ''
set style fill solid 0.6
set boxwidth 0.6
set yrange [0:*]
plot './bandwidth.dat' using 1:3:xtic(2) with boxes notitle
