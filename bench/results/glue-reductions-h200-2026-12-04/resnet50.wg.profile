[2026-12-04 02:26:04.660] [info] OpenGL ES 3.2 on 'NVIDIA H200/PCIe/SSE2' (NVIDIA Corporation, device 0 display)
[2026-12-04 02:26:04.837] [info] loaded resnet50.torchscript.opset17 (gles-compute): 59 steps, 27 kernels compiled, 3 slots, 108 weights
model     resnet50.torchscript.opset17  target gles-compute  device NVIDIA H200/PCIe/SSE2
steps     59 (56 kernel steps, 27 distinct kernels)
input     'input' [1,3,224,224] from /tmp/glue-reductions/full/resnet50.input.f32
latency   median 14.309 ms  min 14.271 ms  max 18.016 ms  (3 runs after 3 warm-up)
output    'output' [1,1000]
profile   one run, GPU time per step (timestamps); run total 14.588 ms
  step  kind      role      task                           ms  recorded_ms  node
     0  upload    -         -                          0.0580            -  
     1  kernel    task      conv2d_1                   0.2744            -  /conv1/Conv
     2  kernel    op        -                          0.0084            -  /maxpool/MaxPool
     3  kernel    task      conv2d_2                   0.0196            -  /layer1/layer1.0/conv1/Conv
     4  kernel    task      conv2d_3                   0.3334            -  /layer1/layer1.0/conv2/Conv
     5  kernel    task      conv2d_4                   0.0486            -  /layer1/layer1.0/downsample/downsample.0/Conv
     6  kernel    task      conv2d_5                   0.0481            -  /layer1/layer1.0/conv3/Conv
     7  kernel    task      conv2d_6                   0.0598            -  /layer1/layer1.1/conv1/Conv
     8  kernel    task      conv2d_3                   0.3317            -  /layer1/layer1.1/conv2/Conv
     9  kernel    task      conv2d_5                   0.0477            -  /layer1/layer1.1/conv3/Conv
    10  kernel    task      conv2d_6                   0.0592            -  /layer1/layer1.2/conv1/Conv
    11  kernel    task      conv2d_3                   0.3339            -  /layer1/layer1.2/conv2/Conv
    12  kernel    task      conv2d_5                   0.0477            -  /layer1/layer1.2/conv3/Conv
    13  kernel    task      conv2d_7                   0.1045            -  /layer2/layer2.0/conv1/Conv
    14  kernel    task      conv2d_8                   0.3479            -  /layer2/layer2.0/conv2/Conv
    15  kernel    task      conv2d_9                   0.1038            -  /layer2/layer2.0/downsample/downsample.0/Conv
    16  kernel    task      conv2d_10                  0.0609            -  /layer2/layer2.0/conv3/Conv
    17  kernel    task      conv2d_11                  0.1052            -  /layer2/layer2.1/conv1/Conv
    18  kernel    task      conv2d_12                  0.3582            -  /layer2/layer2.1/conv2/Conv
    19  kernel    task      conv2d_10                  0.0555            -  /layer2/layer2.1/conv3/Conv
    20  kernel    task      conv2d_11                  0.1042            -  /layer2/layer2.2/conv1/Conv
    21  kernel    task      conv2d_12                  0.3581            -  /layer2/layer2.2/conv2/Conv
    22  kernel    task      conv2d_10                  0.0562            -  /layer2/layer2.2/conv3/Conv
    23  kernel    task      conv2d_11                  0.1046            -  /layer2/layer2.3/conv1/Conv
    24  kernel    task      conv2d_12                  0.3596            -  /layer2/layer2.3/conv2/Conv
    25  kernel    task      conv2d_10                  0.0560            -  /layer2/layer2.3/conv3/Conv
    26  kernel    task      conv2d_13                  0.1065            -  /layer3/layer3.0/conv1/Conv
    27  kernel    task      conv2d_14                  0.5643            -  /layer3/layer3.0/conv2/Conv
    28  kernel    task      conv2d_15                  0.1093            -  /layer3/layer3.0/downsample/downsample.0/Conv
    29  kernel    task      conv2d_16                  0.0574            -  /layer3/layer3.0/conv3/Conv
    30  kernel    task      conv2d_17                  0.1983            -  /layer3/layer3.1/conv1/Conv
    31  kernel    task      conv2d_18                  0.5404            -  /layer3/layer3.1/conv2/Conv
    32  kernel    task      conv2d_16                  0.0576            -  /layer3/layer3.1/conv3/Conv
    33  kernel    task      conv2d_17                  0.1980            -  /layer3/layer3.2/conv1/Conv
    34  kernel    task      conv2d_18                  0.5401            -  /layer3/layer3.2/conv2/Conv
    35  kernel    task      conv2d_16                  0.0632            -  /layer3/layer3.2/conv3/Conv
    36  kernel    task      conv2d_17                  0.1981            -  /layer3/layer3.3/conv1/Conv
    37  kernel    task      conv2d_18                  0.5394            -  /layer3/layer3.3/conv2/Conv
    38  kernel    task      conv2d_16                  0.0580            -  /layer3/layer3.3/conv3/Conv
    39  kernel    task      conv2d_17                  0.1976            -  /layer3/layer3.4/conv1/Conv
    40  kernel    task      conv2d_18                  0.5389            -  /layer3/layer3.4/conv2/Conv
    41  kernel    task      conv2d_16                  0.0571            -  /layer3/layer3.4/conv3/Conv
    42  kernel    task      conv2d_17                  0.1979            -  /layer3/layer3.5/conv1/Conv
    43  kernel    task      conv2d_18                  0.5401            -  /layer3/layer3.5/conv2/Conv
    44  kernel    task      conv2d_16                  0.0578            -  /layer3/layer3.5/conv3/Conv
    45  kernel    task      conv2d_19                  0.2005            -  /layer4/layer4.0/conv1/Conv
    46  kernel    task      conv2d_20                  1.1498            -  /layer4/layer4.0/conv2/Conv
    47  kernel    task      conv2d_21                  0.2052            -  /layer4/layer4.0/downsample/downsample.0/Conv
    48  kernel    task      conv2d_22                  0.1089            -  /layer4/layer4.0/conv3/Conv
    49  kernel    task      conv2d_23                  0.4039            -  /layer4/layer4.1/conv1/Conv
    50  kernel    task      conv2d_24                  1.0115            -  /layer4/layer4.1/conv2/Conv
    51  kernel    task      conv2d_22                  0.1087            -  /layer4/layer4.1/conv3/Conv
    52  kernel    task      conv2d_23                  0.4006            -  /layer4/layer4.2/conv1/Conv
    53  kernel    task      conv2d_24                  1.0051            -  /layer4/layer4.2/conv2/Conv
    54  kernel    task      conv2d_22                  0.1148            -  /layer4/layer4.2/conv3/Conv
    55  kernel    op        -                          0.0074            -  /avgpool/GlobalAveragePool
    57  kernel    task      dense_1                    0.6984            -  /fc/Gemm
    58  download  -         -                          0.0831            -  
  sums    task kernels 14.006 ms (those with a record: 0.000 ms measured here, 0.000 ms recorded); other kernels 0.016 ms; upload 0.058 ms; download 0.083 ms; all steps 14.163 ms of the run's 14.588 ms
top-5
  1     713  28.3746
  2     440  27.6003
  3     568  27.3036
  4      11  26.7581
  5      92  26.6325
