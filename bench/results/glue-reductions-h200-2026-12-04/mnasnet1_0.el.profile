[2026-12-04 02:25:48.181] [info] OpenGL ES 3.2 on 'NVIDIA H200/PCIe/SSE2' (NVIDIA Corporation, device 0 display)
[2026-12-04 02:25:48.226] [info] loaded mnasnet1_0.torchscript.opset17 (gles-compute): 57 steps, 35 kernels compiled, 3 slots, 106 weights
model     mnasnet1_0.torchscript.opset17  target gles-compute  device NVIDIA H200/PCIe/SSE2
steps     57 (54 kernel steps, 35 distinct kernels)
input     'input' [1,3,224,224] from /tmp/glue-reductions/full/mnasnet1_0.input.f32
latency   median 2.878 ms  min 2.616 ms  max 3.164 ms  (3 runs after 3 warm-up)
output    'output' [1,1000]
profile   one run, GPU time per step (timestamps); run total 2.581 ms
  step  kind      role      task                           ms  recorded_ms  node
     0  upload    -         -                          0.0008            -  
     1  kernel    task      conv2d_1                   0.0130            -  /layers/layers.0/Conv
     2  kernel    task      depthwise_conv2d_1         0.0100            -  /layers/layers.3/Conv
     3  kernel    task      conv2d_2                   0.0104            -  /layers/layers.6/Conv
     4  kernel    task      conv2d_3                   0.0119            -  /layers/layers.8/layers.8.0/layers/layers.0/Conv
     5  kernel    task      depthwise_conv2d_2         0.0075            -  /layers/layers.8/layers.8.0/layers/layers.3/Conv
     6  kernel    task      conv2d_4                   0.0156            -  /layers/layers.8/layers.8.0/layers/layers.6/Conv
     7  kernel    task      conv2d_5                   0.0085            -  /layers/layers.8/layers.8.1/layers/layers.0/Conv
     8  kernel    task      depthwise_conv2d_3         0.0080            -  /layers/layers.8/layers.8.1/layers/layers.3/Conv
     9  kernel    task      conv2d_6                   0.0203            -  /layers/layers.8/layers.8.1/layers/layers.6/Conv
    10  kernel    task      conv2d_5                   0.0085            -  /layers/layers.8/layers.8.2/layers/layers.0/Conv
    11  kernel    task      depthwise_conv2d_3         0.0080            -  /layers/layers.8/layers.8.2/layers/layers.3/Conv
    12  kernel    task      conv2d_6                   0.0201            -  /layers/layers.8/layers.8.2/layers/layers.6/Conv
    13  kernel    task      conv2d_5                   0.0085            -  /layers/layers.9/layers.9.0/layers/layers.0/Conv
    14  kernel    task      depthwise_conv2d_4         0.0075            -  /layers/layers.9/layers.9.0/layers/layers.3/Conv
    15  kernel    task      conv2d_7                   0.0192            -  /layers/layers.9/layers.9.0/layers/layers.6/Conv
    16  kernel    task      conv2d_8                   0.0078            -  /layers/layers.9/layers.9.1/layers/layers.0/Conv
    17  kernel    task      depthwise_conv2d_5         0.0082            -  /layers/layers.9/layers.9.1/layers/layers.3/Conv
    18  kernel    task      conv2d_9                   0.0283            -  /layers/layers.9/layers.9.1/layers/layers.6/Conv
    19  kernel    task      conv2d_8                   0.0080            -  /layers/layers.9/layers.9.2/layers/layers.0/Conv
    20  kernel    task      depthwise_conv2d_5         0.0133            -  /layers/layers.9/layers.9.2/layers/layers.3/Conv
    21  kernel    task      conv2d_9                   0.0281            -  /layers/layers.9/layers.9.2/layers/layers.6/Conv
    22  kernel    task      conv2d_10                  0.0097            -  /layers/layers.10/layers.10.0/layers/layers.0/Conv
    23  kernel    task      depthwise_conv2d_6         0.0070            -  /layers/layers.10/layers.10.0/layers/layers.3/Conv
    24  kernel    task      conv2d_11                  0.0488            -  /layers/layers.10/layers.10.0/layers/layers.6/Conv
    25  kernel    task      conv2d_12                  0.0208            -  /layers/layers.10/layers.10.1/layers/layers.0/Conv
    26  kernel    task      depthwise_conv2d_7         0.0080            -  /layers/layers.10/layers.10.1/layers/layers.3/Conv
    27  kernel    task      conv2d_13                  0.0908            -  /layers/layers.10/layers.10.1/layers/layers.6/Conv
    28  kernel    task      conv2d_12                  0.0212            -  /layers/layers.10/layers.10.2/layers/layers.0/Conv
    29  kernel    task      depthwise_conv2d_7         0.0080            -  /layers/layers.10/layers.10.2/layers/layers.3/Conv
    30  kernel    task      conv2d_13                  0.0909            -  /layers/layers.10/layers.10.2/layers/layers.6/Conv
    31  kernel    task      conv2d_12                  0.0210            -  /layers/layers.11/layers.11.0/layers/layers.0/Conv
    32  kernel    task      depthwise_conv2d_8         0.0071            -  /layers/layers.11/layers.11.0/layers/layers.3/Conv
    33  kernel    task      conv2d_14                  0.0916            -  /layers/layers.11/layers.11.0/layers/layers.6/Conv
    34  kernel    task      conv2d_15                  0.0244            -  /layers/layers.11/layers.11.1/layers/layers.0/Conv
    35  kernel    task      depthwise_conv2d_9         0.0072            -  /layers/layers.11/layers.11.1/layers/layers.3/Conv
    36  kernel    task      conv2d_16                  0.1088            -  /layers/layers.11/layers.11.1/layers/layers.6/Conv
    37  kernel    task      conv2d_15                  0.0245            -  /layers/layers.12/layers.12.0/layers/layers.0/Conv
    38  kernel    task      depthwise_conv2d_10        0.0067            -  /layers/layers.12/layers.12.0/layers/layers.3/Conv
    39  kernel    task      conv2d_17                  0.1133            -  /layers/layers.12/layers.12.0/layers/layers.6/Conv
    40  kernel    task      conv2d_18                  0.0423            -  /layers/layers.12/layers.12.1/layers/layers.0/Conv
    41  kernel    task      depthwise_conv2d_11        0.0071            -  /layers/layers.12/layers.12.1/layers/layers.3/Conv
    42  kernel    task      conv2d_19                  0.2133            -  /layers/layers.12/layers.12.1/layers/layers.6/Conv
    43  kernel    task      conv2d_18                  0.0418            -  /layers/layers.12/layers.12.2/layers/layers.0/Conv
    44  kernel    task      depthwise_conv2d_11        0.0072            -  /layers/layers.12/layers.12.2/layers/layers.3/Conv
    45  kernel    task      conv2d_19                  0.2131            -  /layers/layers.12/layers.12.2/layers/layers.6/Conv
    46  kernel    task      conv2d_18                  0.0423            -  /layers/layers.12/layers.12.3/layers/layers.0/Conv
    47  kernel    task      depthwise_conv2d_11        0.0071            -  /layers/layers.12/layers.12.3/layers/layers.3/Conv
    48  kernel    task      conv2d_19                  0.2133            -  /layers/layers.12/layers.12.3/layers/layers.6/Conv
    49  kernel    task      conv2d_18                  0.0418            -  /layers/layers.13/layers.13.0/layers/layers.0/Conv
    50  kernel    task      depthwise_conv2d_12        0.0064            -  /layers/layers.13/layers.13.0/layers/layers.3/Conv
    51  kernel    task      conv2d_20                  0.2134            -  /layers/layers.13/layers.13.0/layers/layers.6/Conv
    52  kernel    task      conv2d_21                  0.0665            -  /layers/layers.14/Conv
    53  kernel    op        -                          0.0060            -  /ReduceMean
    55  kernel    task      dense_1                    0.2262            -  /classifier/classifier.1/Gemm
    56  download  -         -                          0.0369            -  
  sums    task kernels 2.322 ms (those with a record: 0.000 ms measured here, 0.000 ms recorded); other kernels 0.006 ms; upload 0.001 ms; download 0.037 ms; all steps 2.366 ms of the run's 2.581 ms
top-5
  1     811  1.04731e-08
  2     946  9.94426e-09
  3     593  8.62749e-09
  4     411  8.04332e-09
  5     177  7.94364e-09
