"""Tensor Core and category rules on real kernel names (from public traces and the issue)."""

import pytest

from profiler.trace.rules import RULES, classify, short_name

TENSOR_CORE_CASES = [
    # cuDNN xmma: the type letters decide (Nsight Compute on an H200: 0 % vs 40-55 % tensor pipe)
    (
        "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
        "warpsize2x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
        "no",
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_"
        "warpsize2x2x1_g1_tensor16x8x8_execute_kernel__5x_cudnn",
        "yes",
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32_stage4_"
        "warpsize2x2x1_g1_tensor16x8x16_execute_kernel__5x_cudnn",
        "yes",
    ),
    (
        "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_"
        "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "yes",
    ),
    (
        "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "yes",
    ),
    (
        "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
        "tensor16x8x16_kernel",
        "yes",
    ),
    # cuBLAS nvjet (Hopper): type letters; FP32-in 'sss' is not Tensor Core work
    ("nvjet_sm90_hsh_64x128_64x5_1x2_h_bz_coopA_NNT", "yes"),
    ("nvjet_sm90_tst_128x128_32x4_1x2_h_bz_coopA_TNT", "yes"),
    ("nvjet_sm90_sss_128x64_64x4_2x1_v_bz_TNT", "no"),
    # Volta / Turing / Ampere cuBLAS and cutlass
    ("ampere_sgemm_128x64_nn", "no"),
    ("volta_sgemm_128x32_nt", "no"),
    ("volta_h884gemm_64x64_ldg8_nn", "yes"),
    ("turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn", "yes"),
    ("ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_nn", "yes"),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s16816gemm_f16_128x128_32x4_nn_align8>"
        "(cutlass_80_tensorop_s16816gemm_f16_128x128_32x4_nn_align8::Params)",
        "yes",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nn_align1>"
        "(cutlass_80_simt_sgemm_128x128_8x4_nn_align1::Params)",
        "no",
    ),
    ("volta_scudnn_winograd_128x128_ldg1_ldg4_relu_tile148t_nt_v1", "no"),
    (
        "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, "
        "true>(int)",
        "no",
    ),
    ("void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int)", "no"),
    # cuDNN runtime fusion (Torch-TensorRT FP16 engines on Hopper)
    ("cudnn_generated_fort_native_sm90_convFwd_kernel_0", "yes"),
    ("cudnn_generated_fort_native_sm90_matMul_kernel_1", "yes"),
    # TensorRT Myelin: opaque
    ("__myl_bb0_1_ResTraAddMulMeaSubMulMeaAddSqrtDivMulMulAdd", "unknown"),
    # torch.compile: templates have no dtype in the name; pointwise/reductions never use MMA
    ("triton_tem_fused_mm_0", "unknown"),
    ("triton_tem_fused_addmm_relu_2", "unknown"),
    ("triton_poi_fused_add_relu_1", "no"),
    ("triton_red_fused__softmax_2", "no"),
    ("triton_per_fused_native_layer_norm_4", "no"),
    # attention
    (
        "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
        "cutlass::half_t> >(pytorch_flash::Flash_fwd_params)",
        "yes",
    ),
    (
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float>"
        "::Params)",
        "no",
    ),
    # CUDA-core helpers and ATen kernels
    (
        "void gemmSN_TN_kernel_64addr<float, 128, 16, 2, 4, 8, 9, false>(cublasGemmSmallNParams)",
        "no",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>)",
        "no",
    ),
    ("ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "no"),
]


@pytest.mark.parametrize("name,expected", TENSOR_CORE_CASES)
def test_tensor_core_verdict(name, expected):
    assert classify(name).tensor_core == expected, classify(name)


def test_xmma_alone_is_not_evidence():
    assert classify("sm80_xmma_gemm_some_new_kernel").tensor_core == "unknown"


CATEGORY_CASES = [
    ("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc", "convolution"),
    ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n", "GEMM"),
    ("nvjet_sm90_hsh_64x128_64x5_1x2_h_bz_coopA_NNT", "GEMM"),
    ("cudnn_generated_fort_native_sm90_convFwd_kernel_0", "convolution"),
    ("triton_tem_fused_convolution_3", "convolution"),
    ("triton_tem_fused_mm_permute_0", "GEMM"),
    ("triton_poi_fused_add_relu_1", "elementwise"),
    ("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>(float)", "normalization"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(int)", "reduction"),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "convolution"),
    ("void nchwToNhwcKernel<float, float, float, true, false>(int)", "copy"),
    ("ncclDevKernel_AllReduce_Sum_f16_RING_LL", "communication"),
    ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >(Params)", "attention"),
]


@pytest.mark.parametrize("name,expected", CATEGORY_CASES)
def test_category(name, expected):
    assert classify(name).category == expected


def test_every_rule_says_where_its_convention_comes_from():
    for rule in RULES:
        assert rule.source, rule.pattern
        assert rule.category is not None or rule.tensor_core is not None, rule.pattern


def test_verdict_names_the_deciding_rule():
    verdict = classify("nvjet_sm90_sss_128x64_64x4_2x1_v_bz_TNT")
    assert "nvjet" in verdict.tensor_core_rule and "FP32" in verdict.tensor_core_why


def test_short_names():
    assert (
        short_name(
            "void at::native::vectorized_elementwise_kernel<4, at::native::"
            "AddFunctor<float>, at::detail::Array<char*, 3> >(int, at::native::"
            "AddFunctor<float>, at::detail::Array<char*, 3>)"
        )
        == "at::native::vectorized_elementwise_kernel [AddFunctor]"
    )
    assert (
        short_name(
            "void cutlass::Kernel<cutlass_80_tensorop_s16816gemm_f16_128x128_32x4_nn_"
            "align8>(cutlass_80_tensorop_s16816gemm_f16_128x128_32x4_nn_align8::"
            "Params)"
        )
        == "cutlass_80_tensorop_s16816gemm_f16_128x128_32x4_nn_align8"
    )
    assert (
        short_name(
            "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, "
            "float>(int, float const*)"
        )
        == "at::native::max_pool_forward_nchw"
    )
    assert short_name("volta_sgemm_128x32_nt") == "volta_sgemm_128x32_nt"


# ---- INT8, FP8 and ONNX Runtime kernels. Names as seen on an H100 (torch 2.11, onnxruntime-gpu
# 1.31.1, torchao 0.18, ModelOpt 0.47 + TensorRT-RTX) where one was seen; the others are quoted
# from public profiles (cuBLAS igemm, wmma i161616) and microsoft/onnxruntime#7578.
EIGHT_BIT_CASES = [
    # (name, category, tensor core)
    # torch._int_mm through cuBLASLt (IMMA)
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_i16832gemm_s8_128x256_128x3_tn_align16>"
        "(cutlass_80_tensorop_i16832gemm_s8_128x256_128x3_tn_align16::Params)",
        "GEMM",
        "yes",
    ),
    # torchao INT8 DistilBERT under torch.compile: its GEMMs, and its quantize kernels, which
    # Inductor names after the ATen ops they fuse
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_i16832gemm_s8_64x64_128x6_tn_align16>"
        "(cutlass_80_tensorop_i16832gemm_s8_64x64_128x6_tn_align16::Params)",
        "GEMM",
        "yes",
    ),
    (
        "triton_red_fused__to_copy_add_amax_amin_clamp_div_expand_gelu_maximum_minimum_mul_neg_"
        "reciprocal_view_zeros_like_7",
        "reduction",
        "no",
    ),
    (
        "triton_poi_fused__to_copy_add_clamp_clone_div_expand_maximum_minimum_mul_neg_transpose_"
        "view_zeros_like_1",
        "elementwise",
        "no",
    ),
    ("cutlass_80_wmma_tensorop_i161616gemm_s8_forwardCompat_128x128_32x2_tn_align4", "GEMM", "yes"),
    ("ampere_igemm_int8_128x128_ldg4_nt", "GEMM", "no"),  # DP4A, CUDA cores
    # FP8: torch._scaled_mm (nvjet type letter q) and the TensorRT-RTX FP8 engine of ResNet50
    ("nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT", "GEMM", "yes"),
    ("cudnn_generated_fort_native_sm90_matMul_knob_23_128x128x64_10_1_0", "GEMM", "yes"),
    ("cudnn_generated_fort_native_sm90_convFwd_knob_49_128x64x128_8_1_0", "convolution", "yes"),
    ("__myl_MulAddReluCastMulCast_0xd00fd5a7d6095b460dbaecda1ed8a062", "elementwise", "no"),
    ("__myl_CastMulCastCastMulCastConc_0x64158a82142b56ddedbb8830fa336475", "elementwise", "no"),
    # ONNX Runtime's CUDA EP on ResNet50: its own kernels, and cuDNN's
    (
        "void onnxruntime::cuda::_UnaryElementWise<float, float, "
        "onnxruntime::cuda::OP_Relu<float>, 256, 4>(float const*, float*, "
        "onnxruntime::cuda::OP_Relu<float>, long)",
        "elementwise",
        "no",
    ),
    (
        "void onnxruntime::cuda::_BinaryElementWiseSimple<true, true, __half, __half, __half, "
        "onnxruntime::cuda::OP_Add<__half, __half, __half>, 256, 4, int>(__half const*, __half "
        "const*, __half*, onnxruntime::cuda::OP_Add<__half, __half, __half>, int)",
        "elementwise",
        "no",
    ),
    (
        "void onnxruntime::cuda::_UpampleNearestKernel<float, int=4>(onnxruntime::cuda::TArray"
        "<__int64, int=8>, float const *, float*, __int64)",
        "copy",
        "no",
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize32x32x8_stage3_"
        "warpsize1x2x1_g1_ffma_aligna4_alignc4_execute_kernel__5x_cudnn",
        "convolution",
        "no",
    ),
    # ort_fp16: legacy cuDNN FP16 convolutions on the CUDA cores beside Tensor Core ones
    (
        "void implicit_convolve_sgemm<__half, __half, 128, 5, 5, 3, 3, 3, 1, false, false, "
        "true>(int, int, int, __half const*, int, __half*, __half const*, kernel_conv_params, "
        "unsigned long long, int, float, float, int, __half const*, __half const*, bool, bool, "
        "int, int)",
        "convolution",
        "no",
    ),
    (
        "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize64x64x64_"
        "warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn",
        "convolution",
        "yes",
    ),
]


@pytest.mark.parametrize("name,category,tensor_core", EIGHT_BIT_CASES)
def test_eight_bit_and_onnxruntime_kernels(name, category, tensor_core):
    verdict = classify(name)
    assert (verdict.category, verdict.tensor_core) == (category, tensor_core)


def test_fp8_cublas_kernel_is_read_from_its_five_type_letters():
    verdict = classify("nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT")
    assert "qqtst" in verdict.tensor_core_why  # the row names the kernel it was checked on


def test_int8_run_context_decides_inductor_templates():
    from profiler.trace.rules import RunContext

    unknown = classify("triton_tem_fused_mm_0")
    assert unknown.tensor_core == "unknown"
    verdict = classify("triton_tem_fused_mm_0", RunContext(precision="int8", source="result.json"))
    assert verdict.tensor_core == "yes" and "int8" in verdict.tensor_core_rule


# ---- issue 22, point 1: rules read the kernel's own name (function name and template
# arguments), never the namespaces it sits in nor the types of its arguments. Names written in
# the shape real demangled CUDA names have (FBGEMM's quantize ops and TBE kernels, cuDNN's
# padding kernel as seen in public Kineto traces).
FP8_CONVERSION = (
    "void fbgemm_gpu::(anonymous namespace)::_FP8rowwise_to_float_cuda_kernel<float>"
    "(unsigned char const*, int, int, float*, bool)"
)
HFP8_CONVERSION = (
    "void fbgemm_gpu::_hfp8_to_float_cuda_kernel(unsigned char const*, int, int, float*, int, int)"
)
EMBEDDING = (
    "void split_embedding_codegen_forward_unweighted_kernel<float, float, float, long, "
    "2ul>(at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>, "
    "at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, long, "
    "fbgemm_gpu::FixedDivisor, at::GenericPackedTensorAccessor<float, 2ul, "
    "at::RestrictPtrTraits, int>)"
)
BUCKETIZE = (
    "void fbgemm_gpu::_block_bucketize_sparse_features_cuda_kernel1<int, long>(int, int, "
    "long const*, int const*, long const*, int*, fbgemm_gpu::FixedDivisor)"
)
PADDING = (
    "void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, (bool)1, "
    "(cudnnKernelDataType_t)0>(int, int, int, int, int, int, int, int, __nv_bfloat16 "
    "const*, __nv_bfloat16*, int, int, int, int, float, float, cudnn::reduced_divisor, "
    "cudnn::reduced_divisor, cudnn::reduced_divisor)"
)


def _without_argument(name: str, argument: str) -> str:
    return name.replace(f", {argument}", "").replace(f"{argument}, ", "")


@pytest.mark.parametrize("name", [FP8_CONVERSION, HFP8_CONVERSION])
def test_fp8_conversion_in_a_gemm_named_namespace_is_no_tensor_core_gemm(name):
    verdict = classify(name)
    assert (verdict.category, verdict.tensor_core) == ("elementwise", "no"), verdict
    # the same words in a real FP8 GEMM's own name still decide
    gemm = classify(
        "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x64_"
        "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
    )
    assert (gemm.category, gemm.tensor_core) == ("GEMM", "yes")


@pytest.mark.parametrize(
    "name,argument",
    [
        (EMBEDDING, "fbgemm_gpu::FixedDivisor"),
        (BUCKETIZE, "fbgemm_gpu::FixedDivisor"),
        (PADDING, "cudnn::reduced_divisor"),
    ],
)
def test_argument_types_do_not_decide_the_class(name, argument):
    verdict = classify(name)
    assert verdict.category not in ("GEMM", "reduction"), verdict
    assert verdict.tensor_core == "no"
    # one kernel, one class: the same kernel without that argument is classified the same way
    assert _without_argument(name, argument) != name
    assert classify(_without_argument(name, argument)) == verdict


def test_padding_kernel_is_data_movement():
    assert classify(PADDING).category == "copy"


def test_namespace_rows_still_read_the_namespace():
    # rows that spell a namespace (ONNX Runtime's, cuDNN's float engines) keep it
    relu = classify(
        "void onnxruntime::cuda::_UnaryElementWise<float, float, onnxruntime::cuda::"
        "OP_Relu<float>, 256, 4>(float const*, float*, onnxruntime::cuda::OP_Relu"
        "<float>, long)"
    )
    assert relu.category == "elementwise"
    assert (
        classify(
            "void onnxruntime::cuda::_UpampleNearestKernel<float, int=4>(onnxruntime::"
            "cuda::TArray<__int64, int=8>, float const *, float*, __int64)"
        ).category
        == "copy"
    )
    wgrad = classify(
        "void cudnn::detail::wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>"
        "(int, int, int, float const*, int, float*, float const*, kernel_grad_params)"
    )
    assert "cudnn::" in wgrad.tensor_core_rule and wgrad.tensor_core == "no"


def test_own_name_drops_namespaces_and_arguments_but_keeps_template_arguments():
    from profiler.trace.rules import own_name

    own, qualified = own_name(FP8_CONVERSION)
    assert own == "_FP8rowwise_to_float_cuda_kernel<float>"
    assert qualified == "fbgemm_gpu::_FP8rowwise_to_float_cuda_kernel<float>"
    own, _ = own_name(
        "pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, "
        "false, false, cutlass::half_t> >(pytorch_flash::Flash_fwd_params)"
    )
    assert own == (
        "flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, half_t> >"
    )
    assert (
        own_name("nvjet_sm90_hsh_64x128_64x5_1x2_h_bz_coopA_NNT")[0]
        == "nvjet_sm90_hsh_64x128_64x5_1x2_h_bz_coopA_NNT"
    )
    # a name the trace cut short keeps what it has
    assert (
        own_name("void cutlass::Kernel<cutlass_80_tensorop_s16816gemm_f16_128x128_32x4_nn_")[0]
        == "Kernel<cutlass_80_tensorop_s16816gemm_f16_128x128_32x4_nn_"
    )
