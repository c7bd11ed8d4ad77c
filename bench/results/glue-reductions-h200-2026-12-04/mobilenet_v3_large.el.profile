[2026-12-04 02:25:43.578] [info] OpenGL ES 3.2 on 'NVIDIA H200/PCIe/SSE2' (NVIDIA Corporation, device 0 display)
[2026-12-04 02:25:43.619] [info] loaded mobilenet_v3_large.torchscript.opset17 (gles-compute): 92 steps, 71 kernels compiled, 4 slots, 128 weights
model     mobilenet_v3_large.torchscript.opset17  target gles-compute  device NVIDIA H200/PCIe/SSE2
steps     92 (89 kernel steps, 71 distinct kernels)
input     'input' [1,3,224,224] from /tmp/glue-reductions/full/mobilenet_v3_large.input.f32
latency   median 3.306 ms  min 2.717 ms  max 5.377 ms  (3 runs after 3 warm-up)
output    'output' [1,1000]
profile   one run, GPU time per step (timestamps); run total 2.949 ms
  step  kind      role      task                           ms  recorded_ms  node
     0  upload    -         -                          0.0548            -  
     1  kernel    task      conv2d_1                   0.0096            -  /features/features.0/features.0.0/Conv
     2  kernel    task      depthwise_conv2d_1         0.0078            -  /features/features.1/block/block.0/block.0.0/Conv
     3  kernel    task      conv2d_2                   0.0080            -  /features/features.1/block/block.1/block.1.0/Conv
     4  kernel    task      conv2d_3                   0.0135            -  /features/features.2/block/block.0/block.0.0/Conv
     5  kernel    task      depthwise_conv2d_2         0.0078            -  /features/features.2/block/block.1/block.1.0/Conv
     6  kernel    task      conv2d_4                   0.0188            -  /features/features.2/block/block.2/block.2.0/Conv
     7  kernel    task      conv2d_5                   0.0087            -  /features/features.3/block/block.0/block.0.0/Conv
     8  kernel    task      depthwise_conv2d_3         0.0079            -  /features/features.3/block/block.1/block.1.0/Conv
     9  kernel    task      conv2d_6                   0.0203            -  /features/features.3/block/block.2/block.2.0/Conv
    10  kernel    task      conv2d_5                   0.0085            -  /features/features.4/block/block.0/block.0.0/Conv
    11  kernel    task      depthwise_conv2d_4         0.0072            -  /features/features.4/block/block.1/block.1.0/Conv
    12  kernel    op        -                          0.0684            -  /features/features.4/block/block.2/avgpool/GlobalAveragePool
    13  kernel    task      conv2d_7                   0.0092            -  /features/features.4/block/block.2/fc1/Conv
    14  kernel    task      conv2d_8                   0.0058            -  /features/features.4/block/block.2/fc2/Conv
    15  kernel    op        -                          0.0050            -  /features/features.4/block/block.2/scale_activation/HardSigmoid
    16  kernel    op        -                          0.0058            -  /features/features.4/block/block.2/Mul
    17  kernel    task      conv2d_9                   0.0194            -  /features/features.4/block/block.3/block.3.0/Conv
    18  kernel    task      conv2d_10                  0.0079            -  /features/features.5/block/block.0/block.0.0/Conv
    19  kernel    task      depthwise_conv2d_5         0.0080            -  /features/features.5/block/block.1/block.1.0/Conv
    20  kernel    op        -                          0.0736            -  /features/features.5/block/block.2/avgpool/GlobalAveragePool
    21  kernel    task      conv2d_11                  0.0121            -  /features/features.5/block/block.2/fc1/Conv
    22  kernel    task      conv2d_12                  0.0060            -  /features/features.5/block/block.2/fc2/Conv
    23  kernel    op        -                          0.0052            -  /features/features.5/block/block.2/scale_activation/HardSigmoid
    24  kernel    op        -                          0.0061            -  /features/features.5/block/block.2/Mul
    25  kernel    task      conv2d_13                  0.0292            -  /features/features.5/block/block.3/block.3.0/Conv
    26  kernel    task      conv2d_10                  0.0079            -  /features/features.6/block/block.0/block.0.0/Conv
    27  kernel    task      depthwise_conv2d_5         0.0083            -  /features/features.6/block/block.1/block.1.0/Conv
    28  kernel    op        -                          0.0688            -  /features/features.6/block/block.2/avgpool/GlobalAveragePool
    29  kernel    task      conv2d_11                  0.0121            -  /features/features.6/block/block.2/fc1/Conv
    30  kernel    task      conv2d_12                  0.0060            -  /features/features.6/block/block.2/fc2/Conv
    31  kernel    op        -                          0.0051            -  /features/features.6/block/block.2/scale_activation/HardSigmoid
    32  kernel    op        -                          0.0062            -  /features/features.6/block/block.2/Mul
    33  kernel    task      conv2d_13                  0.0285            -  /features/features.6/block/block.3/block.3.0/Conv
    34  kernel    task      conv2d_14                  0.0096            -  /features/features.7/block/block.0/block.0.0/Conv
    35  kernel    task      depthwise_conv2d_6         0.0063            -  /features/features.7/block/block.1/block.1.0/Conv
    36  kernel    task      conv2d_15                  0.0488            -  /features/features.7/block/block.2/block.2.0/Conv
    37  kernel    task      conv2d_16                  0.0204            -  /features/features.8/block/block.0/block.0.0/Conv
    38  kernel    task      depthwise_conv2d_7         0.0061            -  /features/features.8/block/block.1/block.1.0/Conv
    39  kernel    task      conv2d_17                  0.0473            -  /features/features.8/block/block.2/block.2.0/Conv
    40  kernel    task      conv2d_18                  0.0208            -  /features/features.9/block/block.0/block.0.0/Conv
    41  kernel    task      depthwise_conv2d_8         0.0063            -  /features/features.9/block/block.1/block.1.0/Conv
    42  kernel    task      conv2d_19                  0.0390            -  /features/features.9/block/block.2/block.2.0/Conv
    43  kernel    task      conv2d_18                  0.0207            -  /features/features.10/block/block.0/block.0.0/Conv
    44  kernel    task      depthwise_conv2d_8         0.0063            -  /features/features.10/block/block.1/block.1.0/Conv
    45  kernel    task      conv2d_19                  0.0390            -  /features/features.10/block/block.2/block.2.0/Conv
    46  kernel    task      conv2d_20                  0.0214            -  /features/features.11/block/block.0/block.0.0/Conv
    47  kernel    task      depthwise_conv2d_9         0.0074            -  /features/features.11/block/block.1/block.1.0/Conv
    48  kernel    op        -                          0.0249            -  /features/features.11/block/block.2/avgpool/GlobalAveragePool
    49  kernel    task      conv2d_21                  0.0368            -  /features/features.11/block/block.2/fc1/Conv
    50  kernel    task      conv2d_22                  0.0130            -  /features/features.11/block/block.2/fc2/Conv
    51  kernel    op        -                          0.0053            -  /features/features.11/block/block.2/scale_activation/HardSigmoid
    52  kernel    op        -                          0.0064            -  /features/features.11/block/block.2/Mul
    53  kernel    task      conv2d_23                  0.0922            -  /features/features.11/block/block.3/block.3.0/Conv
    54  kernel    task      conv2d_24                  0.0274            -  /features/features.12/block/block.0/block.0.0/Conv
    55  kernel    task      depthwise_conv2d_10        0.0078            -  /features/features.12/block/block.1/block.1.0/Conv
    56  kernel    op        -                          0.0250            -  /features/features.12/block/block.2/avgpool/GlobalAveragePool
    57  kernel    task      conv2d_25                  0.0497            -  /features/features.12/block/block.2/fc1/Conv
    58  kernel    task      conv2d_26                  0.0215            -  /features/features.12/block/block.2/fc2/Conv
    59  kernel    op        -                          0.0054            -  /features/features.12/block/block.2/scale_activation/HardSigmoid
    60  kernel    op        -                          0.0068            -  /features/features.12/block/block.2/Mul
    61  kernel    task      conv2d_27                  0.1272            -  /features/features.12/block/block.3/block.3.0/Conv
    62  kernel    task      conv2d_24                  0.0273            -  /features/features.13/block/block.0/block.0.0/Conv
    63  kernel    task      depthwise_conv2d_11        0.0070            -  /features/features.13/block/block.1/block.1.0/Conv
    64  kernel    op        -                          0.0060            -  /features/features.13/block/block.2/avgpool/GlobalAveragePool
    65  kernel    task      conv2d_25                  0.0494            -  /features/features.13/block/block.2/fc1/Conv
    66  kernel    task      conv2d_26                  0.0156            -  /features/features.13/block/block.2/fc2/Conv
    67  kernel    op        -                          0.0054            -  /features/features.13/block/block.2/scale_activation/HardSigmoid
    68  kernel    op        -                          0.0056            -  /features/features.13/block/block.2/Mul
    69  kernel    task      conv2d_28                  0.1266            -  /features/features.13/block/block.3/block.3.0/Conv
    70  kernel    task      conv2d_29                  0.0350            -  /features/features.14/block/block.0/block.0.0/Conv
    71  kernel    task      depthwise_conv2d_12        0.0069            -  /features/features.14/block/block.1/block.1.0/Conv
    72  kernel    op        -                          0.0059            -  /features/features.14/block/block.2/avgpool/GlobalAveragePool
    73  kernel    task      conv2d_30                  0.0685            -  /features/features.14/block/block.2/fc1/Conv
    74  kernel    task      conv2d_31                  0.0208            -  /features/features.14/block/block.2/fc2/Conv
    75  kernel    op        -                          0.0052            -  /features/features.14/block/block.2/scale_activation/HardSigmoid
    76  kernel    op        -                          0.0056            -  /features/features.14/block/block.2/Mul
    77  kernel    task      conv2d_32                  0.1826            -  /features/features.14/block/block.3/block.3.0/Conv
    78  kernel    task      conv2d_29                  0.0367            -  /features/features.15/block/block.0/block.0.0/Conv
    79  kernel    task      depthwise_conv2d_12        0.0070            -  /features/features.15/block/block.1/block.1.0/Conv
    80  kernel    op        -                          0.0060            -  /features/features.15/block/block.2/avgpool/GlobalAveragePool
    81  kernel    task      conv2d_30                  0.0686            -  /features/features.15/block/block.2/fc1/Conv
    82  kernel    task      conv2d_31                  0.0207            -  /features/features.15/block/block.2/fc2/Conv
    83  kernel    op        -                          0.0052            -  /features/features.15/block/block.2/scale_activation/HardSigmoid
    84  kernel    op        -                          0.0056            -  /features/features.15/block/block.2/Mul
    85  kernel    task      conv2d_32                  0.1771            -  /features/features.15/block/block.3/block.3.0/Conv
    86  kernel    task      conv2d_29                  0.0347            -  /features/features.16/features.16.0/Conv
    87  kernel    op        -                          0.0062            -  /avgpool/GlobalAveragePool
    89  kernel    task      dense_1                    0.1678            -  /classifier/classifier.0/Gemm
    90  kernel    task      dense_2                    0.2235            -  /classifier/classifier.3/Gemm
    91  download  -         -                          0.0324            -  
  sums    task kernels 2.229 ms (those with a record: 0.000 ms measured here, 0.000 ms recorded); other kernels 0.375 ms; upload 0.055 ms; download 0.032 ms; all steps 2.691 ms of the run's 2.949 ms
top-5
  1     805  5.19786e-10
  2     905  4.98011e-10
  3     825  4.23578e-10
  4     108  3.83085e-10
  5     454  3.79291e-10
