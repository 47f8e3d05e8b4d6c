"""Kernel category and Tensor Core rules: one table of data.

Each row is a regular expression searched (case-insensitively) in the kernel's own name, with an
opinion on the category, on Tensor Core use, or on both, and a note saying where the naming
convention comes from. The kernel's own name is its function name with its template arguments
(which name tile shapes, data types, functors and inner kernels), without the namespaces the
function sits in and without its argument list: ``void fbgemm_gpu::_hfp8_to_float_cuda_kernel
(unsigned char const*, ...)`` is searched as ``_hfp8_to_float_cuda_kernel``, so neither the
"gemm" of ``fbgemm_gpu`` nor an argument of type ``fbgemm_gpu::FixedDivisor`` or
``cudnn::reduced_divisor`` says what the kernel does. A row whose pattern spells a namespace
(it contains ``::``, e.g. ``onnxruntime::cuda::``) is searched in the qualified name instead
(namespaces kept, arguments still dropped): it names a library on purpose. For each kernel the
first row with an opinion decides that question, so more specific rows come first. Adding a GPU
generation or a library is adding rows.

Tensor Core verdicts: ``"yes"``, ``"no"`` or ``"unknown"``. The kernel name is the only
evidence a trace has, and it can lie by omission: ``xmma`` only says "NVIDIA's matrix-multiply
template library", which also builds FP32 kernels that run on the CUDA cores (Nsight Compute on
an H200: 0 % tensor-pipe activity for cuDNN's ``sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_*``,
40-55 % for its ``tf32f32`` and ``f16f16`` siblings). So the data-type letters decide, and a
kernel whose name carries no type evidence says "unknown" rather than guessing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

CATEGORIES = (
    "GEMM",
    "convolution",
    "attention",
    "elementwise",
    "reduction",
    "normalization",
    "copy",
    "memset",
    "communication",
    "other",
)
MATRIX_CATEGORIES = ("GEMM", "convolution", "attention")

YES, NO, UNKNOWN = "yes", "no", "unknown"


@dataclass(frozen=True)
class Rule:
    pattern: str
    category: str | None = None  # None: no opinion, a later row decides
    tensor_core: str | None = None  # "yes" / "no" / "unknown" / None (no opinion)
    source: str = ""  # where the naming convention comes from

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)

    @property
    def qualified(self) -> bool:
        """Whether the pattern names a namespace, so it is searched with the namespaces kept."""
        return "::" in self.pattern

    def matches(self, own: str, qualified: str) -> bool:
        return bool(self.regex.search(qualified if self.qualified else own))


@cache
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_ANONYMOUS = "(anonymous namespace)::"
_SCOPE = re.compile(r"\b[A-Za-z_]\w*::")


def own_name(name: str) -> tuple[str, str]:
    """(own, qualified) of a demangled kernel name: ``qualified`` is the name without its
    argument list (the first ``(`` outside template brackets, after the function name) and
    without ``void``; ``own`` is that without namespace qualifiers, the function's and its
    template arguments' (``fbgemm_gpu::``, ``at::native::``). Template arguments stay in both.
    Names that are no C++ signature (``nvjet_*``, ``triton_*``) come back whole; a name cut short
    (traces truncate long names) keeps what it has."""
    text = name.strip().replace(_ANONYMOUS, "")
    text = text.removeprefix("void ")
    depth = 0
    for i, char in enumerate(text):
        if char == "<":
            depth += 1
        elif char == ">":
            depth = max(depth - 1, 0)
        elif char == "(" and depth == 0 and i > 0:
            text = text[:i]
            break
    return _SCOPE.sub("", text), text


# Type tokens of NVIDIA's xmma/cutlass names: <A><B>_<C><accumulator>, e.g. f16f16_f16f32.
_TC_INPUT = r"(?:f16|bf16|tf32|e4m3|e5m2|fp8|i8|s8|u8|i4|int8)"
# cuBLAS nvjet names carry three BLAS precision letters (A/B input, compute, output), e.g.
# nvjet_sm90_hsh_...: h = FP16, b = BF16, t = TF32, e/q = FP8 flavours, i = INT8, s = FP32,
# d = FP64. The input letter decides. FP32 inputs with FP32 compute ("sss") are not Tensor Core
# work: with TF32 allowed cuBLAS picks the "tst" kernels instead. (Decided from the letters;
# to be pinned against Nsight Compute on the GPU traces, issue point 8.)
_NVJET_TC = r"nvjet_(?:sm\d+_|tst_|[a-z]{3}_)?(?:[hbteqi][a-z]{2}(?:[a-z]{2})?)_"

RULES: tuple[Rule, ...] = (
    # ---- communication: never Tensor Core ------------------------------------------------
    Rule(
        r"nccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|cross_device_reduce",
        "communication",
        NO,
        "NCCL kernels are ncclKernel_*/ncclDevKernel_*; custom all-reduce "
        "kernels (vLLM, TensorRT-LLM) say so in their names",
    ),
    # ---- 8-bit quantize / dequantize / cast kernels: elementwise, never MMA --------------
    Rule(
        r"fake_e4m3fy|e4m3fy|fake_tensor_quant|tensor_quant_kernel|fake_quant",
        "elementwise",
        NO,
        "ModelOpt's CUDA extension (modelopt/torch/quantization/src: fake_e4m3fy_kernel, "
        "fused_fake_e4m3fy, fake_tensor_quant): per-element scale, round and clamp. Names from "
        "the source; not seen in a trace here (they run during calibration, and the ttrt_fp8 "
        "engine quantizes in Myelin kernels: __myl_MulAddReluCastMulCast_*, the Myelin row)",
    ),
    Rule(
        r"(?:^|[^a-z])(?:de)?quantize|quantize_?per|dynamic_quant|scaled_fp8_quant|to_fp8|"
        r"cast_?to_?(?:fp8|e4m3|int8)|choose_?qparams",
        "elementwise",
        NO,
        "quantize/dequantize/convert kernels (torchao/Inductor quantize_affine, TensorRT "
        "Q/DQ, vLLM scaled_fp8_quant): elementwise conversions. No real example seen here: "
        "torchao's dynamic INT8 on an H100 quantized inside Inductor kernels named after ATen "
        "ops (triton_red_fused__to_copy_add_amax_amin_clamp_div_..., the triton rows)",
    ),
    Rule(
        r"(?:^|_)(?:h?fp8|fp16|bf16|bfloat16|half|float|fused\d*bit)\w*_to_(?:h?fp8|fp16|bf16|"
        r"bfloat16|half|float|fused)",
        "elementwise",
        NO,
        "type conversion kernels named <from>_to_<to>: FBGEMM's _float_to_FP8rowwise_cuda_"
        "kernel, _FP8rowwise_to_float_cuda_kernel, _hfp8_to_float_cuda_kernel, "
        "_fused8bitrowwise_to_float_cuda_kernel (fbgemm_gpu quantize ops; names from the "
        "source, not seen in a trace here): per-element scale and cast, no MMA",
    ),
    # ---- ONNX Runtime's own CUDA kernels (its GEMMs and convolutions are cuBLAS/cuDNN, decided
    # by the library rows below) ------------------------------------------------------------
    Rule(
        r"onnxruntime::(?:contrib::)?cuda::_?\w*ElementWise",
        "elementwise",
        NO,
        "ORT CUDA EP elementwise kernels: onnxruntime::cuda::_UnaryElementWise<float, float, "
        "OP_Relu<float>, 256, 4> and _BinaryElementWiseSimple<..., OP_Add<...>> (ResNet50 on "
        "an H100, onnxruntime-gpu 1.31.1; also nvprof output in microsoft/onnxruntime#9244)",
    ),
    Rule(
        r"onnxruntime::(?:contrib::)?cuda::_?\w*(?:Concat|Transpose|Gather|Slice|Expand|Pad|"
        r"Split|Upample|Upsample|Resize|Tile|Scatter|Copy)",
        "copy",
        NO,
        "ORT CUDA EP data-movement kernels, e.g. onnxruntime::cuda::_ConcatKernel, "
        "_UpampleNearestKernel (nvprof output in microsoft/onnxruntime#7578)",
    ),
    Rule(
        r"onnxruntime::(?:contrib::)?cuda::\w*(?:Softmax|Reduce|Pool)",
        "reduction",
        NO,
        "ORT CUDA EP softmax/reduction/pooling kernels (pattern from ORT's kernel names; no "
        "example in a trace here: ResNet50's reduction ran as "
        "onnxruntime::cuda::detail::reduce_matrix_columns_kernel, a default-rule reduction)",
    ),
    Rule(
        r"onnxruntime::(?:contrib::)?cuda::\w*(?:LayerNorm|BatchNorm|SkipLayerNorm)",
        "normalization",
        NO,
        "ORT CUDA EP (contrib) normalization kernels (pattern from ORT's "
        "kernel names; no example in a trace here)",
    ),
    # ---- TensorRT --------------------------------------------------------------------
    Rule(
        r"^__myl_(?:Resh|Add|Relu|Move|Conc|Mul|Mean|Tran|Slic|Cast|Sub|Div|Sum|Max|Min|Exp|"
        r"Sigm|Tanh|Gelu|Silu|Erf|Pow|Sqrt|Rsqr|Neg|Abs|Copy|Gath|Pad|Quan|Dequ|Qdq|Cvt|Clip|"
        r"Roun)+_",
        tensor_core=NO,
        source="TensorRT Myelin kernels spell their fused ops in the name (__myl_ReshAddRelu = "
        "reshape+add+relu); with only pointwise, reduction and data-movement ops there is no "
        "MMA (Nsight Compute on an H200: 0.5 % tensor-pipe activity for __myl_ReshAddRelu)",
    ),
    Rule(
        r"^__myl_|myelin",
        tensor_core=UNKNOWN,
        source="other TensorRT Myelin fused kernels (__myl_*): no type evidence in the name",
    ),
    # ---- torch.compile (Inductor) Triton kernels -------------------------------------------
    Rule(
        r"triton_tem_\w*int_mm",
        "GEMM",
        YES,
        "Inductor names template kernels after the ATen ops they fuse; torch._int_mm lowers to "
        "the tuned_int_mm Triton template (torch/_inductor/kernel/mm.py), whose tl.dot on INT8 "
        "operands issues IMMA (sm80) / IGMMA (sm90). No real example seen: in default mode "
        "Inductor kept torch._int_mm on cuBLASLt's cutlass_80_tensorop_i16832gemm_s8 (H100)",
    ),
    Rule(
        r"triton_tem_fused_.*conv",
        "convolution",
        UNKNOWN,
        "Inductor template conv: tl.dot uses MMA for FP16/BF16 (or TF32) inputs, FFMA for "
        "IEEE FP32; the name does not say which",
    ),
    Rule(
        r"triton_tem_",
        "GEMM",
        UNKNOWN,
        "Inductor template (mm/bmm/addmm, max-autotune): MMA only for FP16/BF16/TF32 inputs; "
        "the name does not carry the dtype, so unknown without other evidence",
    ),
    Rule(r"triton_poi_", "elementwise", NO, "Inductor pointwise kernels: no tl.dot"),
    Rule(r"triton_(?:red|per)_", "reduction", NO, "Inductor (persistent) reductions: no tl.dot"),
    # ---- explicit CUDA-core GEMM markers (checked before any Tensor Core pattern) --------
    Rule(
        r"(?:^|[^a-z])(?:volta|turing|ampere|maxwell|pascal|sm\d+)?_?sgemm|_sgemm_|implicit_convolve_sgemm",
        tensor_core=NO,
        source="cuBLAS/cuDNN 'sgemm': FP32 FFMA kernels on the CUDA cores "
        "(ampere_sgemm_*, volta_sgemm_*, implicit_convolve_sgemm)",
    ),
    Rule(
        r"(?:^|_)igemm",
        tensor_core=NO,  # name from that benchmark, not seen in a trace here
        source="cuBLAS 'igemm' INT8 kernels (ampere_igemm_int8_128x128_ldg4_nt) use DP4A on the "
        "CUDA cores: a public benchmark measured 71 TOPS for them, the card's DP4A ceiling, "
        "against 393 TOPS for cutlass_80_tensorop_i16832gemm_s8 on the same GPU",
    ),
    Rule(
        r"(?:^|_)dgemm|_zgemm|_cgemm",
        tensor_core=NO,
        source="cuBLAS FP64/complex legacy kernels; Tensor Core DMMA kernels carry an MMA shape",
    ),
    Rule(
        r"simt|ffma|scudnn|fp32_?gemm_?fp32",
        tensor_core=NO,
        source="cutlass 'simt' kernels and cuDNN 'scudnn' (single precision) kernels run FFMA",
    ),
    Rule(
        r"cudnn_generated_\w*resample",
        "reduction",
        NO,
        "cuDNN runtime-compiled resample (pooling) kernels, e.g. "
        "cudnn_generated_resampleFwd_cutlass_* in TensorRT engines: no MMA",
    ),
    Rule(
        r"cask_cudnn::compute\w*offsets",
        "other",
        NO,
        "cuDNN/cask offset-table helper kernels that run before an implicit GEMM",
    ),
    Rule(
        r"^(?:void )?cudnn::[\w:]+<(?:float|double)\b",
        tensor_core=NO,
        source="cuDNN's own engines templated on float/double (dgrad_engine<float,...>, "
        "wgrad_alg0_engine<float,...>, winograd_nonfused<float,...>): FFMA kernels",
    ),
    Rule(
        r"gemv|gemmSN_|gemmk1_|dot_kernel|splitKreduce",
        tensor_core=NO,
        source="cuBLAS gemv / small-N (gemmSN) / k=1 kernels and the split-K reduction are "
        "CUDA-core kernels",
    ),
    # ---- NVIDIA xmma (cuDNN, cuBLAS, TensorRT): the type letters decide ---------------
    Rule(
        r"xmma.*?_f32f32_f32f32",
        tensor_core=NO,
        source="xmma FP32 in/FP32 math (e.g. sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_*): "
        "Nsight Compute shows 0 % tensor-pipe activity on an H200",
    ),
    Rule(
        rf"xmma.*?_{_TC_INPUT}(?:{_TC_INPUT}|f32|i32)?_",
        tensor_core=YES,
        source="xmma with FP16/BF16/TF32/FP8/INT8 inputs (f16f16_*, tf32f32_*, bf16bf16_*, "
        "i8i8_*): issues HMMA/IMMA/GMMA; 40-55 % tensor-pipe activity in Nsight Compute (H200)",
    ),
    Rule(
        r"xmma",
        tensor_core=UNKNOWN,
        source="'xmma' alone proves nothing: the library also builds FP32 CUDA-core kernels",
    ),
    # ---- INT8 and FP8 Tensor Core GEMMs -------------------------------------------------
    Rule(
        r"tensorop_(?:[a-z0-9]+_)?i\d{4,6}gemm|_i8i8_|_s8s8_|imma",
        "GEMM",
        YES,
        "cutlass INT8 Tensor Core GEMMs: torch._int_mm ran "
        "cutlass_80_tensorop_i16832gemm_s8_128x256_128x3_tn_align16 through cuBLASLt on an H100, "
        "and torchao's INT8 DistilBERT _64x64_128x6 / _128x64_128x3 variants (IMMA); the wmma "
        "i161616 and xmma i8i8/s8s8 spellings are from public profiles, not seen here",
    ),
    Rule(
        r"(?:gemm|_mm_|conv|fprop|gmma|matmul).*(?:e4m3|e5m2|fp8)|(?:e4m3|e5m2|fp8).*(?:gemm|"
        r"_mm_|conv|fprop|gmma|matmul)|qgmma",
        tensor_core=YES,
        source="FP8 (e4m3/e5m2) GEMM/conv kernels: FP8 operands exist only for the Tensor Cores "
        "(QGMMA, the sm90 wgmma FP8 instruction; QMMA on sm89). No real example of this spelling "
        "seen here: cuBLAS FP8 is nvjet_*_qq* (the nvjet row) and TensorRT's FP8 convolutions "
        "are cudnn_generated_fort_native_* (no type in the name)",
    ),
    # ---- Hopper and later --------------------------------------------------------------
    Rule(
        _NVJET_TC,
        tensor_core=YES,
        source="cuBLAS(Lt) nvjet kernels (sm90+): the first type letter h/b/t/e/q/i is a "
        "Tensor Core input type; FP8 names carry five letters (torch._scaled_mm with e4m3 "
        "operands ran nvjet_sm90_qqtst_128x128_128x6_1x2_h_bz_coopA_algo2_TNT on an H100)",
    ),
    Rule(
        r"nvjet_(?:sm\d+_)?[sd][a-z]{2}_",
        tensor_core=NO,
        source="nvjet with FP32 ('sss') or FP64 inputs: no TF32/FP16 inputs for the MMA units",
    ),
    Rule(r"nvjet", "GEMM", UNKNOWN, "nvjet name without readable type letters"),
    Rule(
        r"wgmma|gmma|warpgroup|warpspecialized|warp_specialized",
        tensor_core=YES,
        source="Hopper warp-group MMA (wgmma/GMMA) and cutlass 3.x warp-specialized GEMMs",
    ),
    Rule(
        r"cudnn_generated_fort_native_(?:sdpa|flash)",
        "attention",
        YES,
        "cuDNN runtime-compiled (fort native) SDPA/flash kernels: Tensor Core only",
    ),
    Rule(
        r"cudnn_generated_fort_native.*conv",
        "convolution",
        YES,
        "cuDNN runtime-fusion engines (cudnn_generated_fort_native_sm90_convFwd*): the "
        "runtime-fusion engines are built on Tensor Core MMA (FP16/BF16, or TF32 for FP32)",
    ),
    Rule(
        r"cudnn_generated_fort_native.*mat_?mul",
        "GEMM",
        YES,
        "cuDNN runtime-fusion matmul engines (cudnn_generated_fort_native_sm90_matMul_knob_23_"
        "128x128x64_10_1_0 in TensorRT-RTX's FP8 ResNet50 on an H100): the data type is not in "
        "the name; Tensor Core by the engine family",
    ),
    Rule(
        r"cudnn_generated_fort_native",
        tensor_core=YES,
        source="other cuDNN runtime-fusion engines (Tensor Core MMA)",
    ),
    # ---- Volta / Turing / Ampere cuBLAS, cuDNN, cutlass names --------------------------
    Rule(
        r"[a-z_](?:884|1684|1688|16816|16832|8816|8832|168256)(?:gemm|cudnn|conv|_|[a-z])",
        tensor_core=YES,
        source="MMA instruction shape after a type letter: volta_h884gemm, "
        "turing_fp16_s1688gemm, ampere_s16816gemm, i8816 (PyProf/TensorBoard plugin list, "
        "cuBLAS/cuDNN kernel naming)",
    ),
    Rule(
        r"hmma|imma|dmma|tensorop|wmma|mma_sync|tensor_?core",
        tensor_core=YES,
        source="HMMA/IMMA/DMMA instruction names; cutlass 'tensorop' and 'wmma' kernels",
    ),
    # ---- attention ---------------------------------------------------------------------
    Rule(
        r"fmha.*(?:f32|fp32)(?!_?acc)|cutlassF_f32|cutlassB_f32",
        "attention",
        NO,
        "memory-efficient attention (xformers/cutlass fmha) FP32 variants run on CUDA cores",
    ),
    Rule(
        r"flash_?(?:fwd|bwd|attn|attention)|fmha|mha_|_mha|sdpa|attention|flash_kernel",
        "attention",
        YES,
        "FlashAttention/cutlass fmha/TensorRT mha kernels: FP16/BF16 only, built on mma.sync/wgmma",
    ),
    # ---- data movement (after the library rows, so "transpose" in a GEMM name is harmless)
    Rule(
        r"memset|fill_kernel|zero_?kernel",
        "memset",
        NO,
        "device-side memset kernels (cuBLAS/cuDNN workspace clears)",
    ),
    Rule(
        r"memcpy|copy_?kernel|copypacked|genericreformat|reformat|catarray|concat|"
        r"transpose|permute|copy_|gather_kernel|scatter_kernel|index_kernel|nchwtonhwc|nhwctonchw|"
        r"addpadding",
        "copy",
        NO,
        "data-movement kernels: ATen copy_/cat/index, TensorRT "
        "reformat (genericReformat), cuDNN's nhwcAddPaddingKernel (copies a tensor into a "
        "zero-padded layout before a convolution)",
    ),
    # ---- categories of the remaining kernels ---------------------------------------------
    Rule(
        r"conv|fprop|dgrad|wgrad|winograd|implicit_?gemm|im2col|col2im|depthwise|precomputed|"
        r"scudnn|hcudnn|\dcudnn",
        "convolution",
        source="cuDNN/cutlass/ATen convolution kernels (fprop/dgrad/wgrad, "
        "implicit GEMM, winograd, im2col; cuDNN's volta_scudnn_*/turing_h1688cudnn_*)",
    ),
    Rule(
        r"gemm|matmul|mat_mul|nvjet|cutlass|_mm_|bmm|addmm|cublas|splitk|_gemm",
        "GEMM",
        source="cuBLAS/cutlass GEMM kernels",
    ),
    Rule(
        r"norm|bn_fw|bn_bw|batch_?norm|layer_?norm|rms|welford|instance_?norm|group_?norm",
        "normalization",
        source="ATen/cuDNN/apex normalization kernels",
    ),
    Rule(
        r"reduce|softmax|sum_|_sum|mean|argmax|argmin|max_pool|avg_pool|pool|topk|sort|"
        r"scan|cumsum|norm_kernel|lognorm|criterion|nll_?loss|cross_?entropy",
        "reduction",
        source="ATen reduce_kernel, softmax, pooling, sort/scan",
    ),
    Rule(
        r"elementwise|pointwise|functor|vectorized|unrolled|activation|relu|gelu|silu|sigmoid|"
        r"tanh|add|mul|_div|clamp|where|cast|bias|scale",
        "elementwise",
        source="ATen vectorized/unrolled_elementwise_kernel and fused activations",
    ),
)

_NON_MATRIX_DEFAULT = Rule(
    "",
    tensor_core=NO,
    source="no GEMM/convolution/attention pattern in "
    "the name: elementwise, reduction, copy ... kernels issue no MMA",
)
_MATRIX_DEFAULT = Rule(
    "", tensor_core=UNKNOWN, source="matrix kernel whose name carries no Tensor Core evidence"
)
_OTHER = Rule("", category="other", source="no rule matched")


@dataclass(frozen=True)
class RunContext:
    """What the run that made a trace says about its arithmetic (its result.json): evidence for
    kernels whose names carry no data type."""

    precision: str | None = None  # the backend's precision: "fp32", "fp16", "bf16"
    tf32: bool | None = None  # whether TF32 was allowed
    source: str = ""  # where this came from, for the rule text
    #: kernel name -> launches in one call made without the profiler, when the run recorded
    #: it (trace/step_kernels.py compares the profiled steps with it)
    untraced_kernels: dict[str, int] | None = None


@dataclass(frozen=True)
class ContextRule:
    pattern: str
    precisions: tuple[str, ...]
    tf32: bool | None  # None: either
    tensor_core: str
    source: str


#: Rules that need the run's precision; they apply only where the name alone said "unknown".
CONTEXT_RULES: tuple[ContextRule, ...] = (
    ContextRule(
        r"triton_tem_",
        ("fp16", "bf16"),
        None,
        YES,
        "Inductor template kernels run tl.dot on the model's dtype; FP16/BF16 operands "
        "issue MMA (HMMA/wgmma)",
    ),
    ContextRule(
        r"triton_tem_",
        ("int8",),
        None,
        YES,
        "inductor_int8 runs INT8 GEMMs (tl.dot on int8 -> IMMA/IGMMA) and leaves the "
        "other layers in BF16 (HMMA/wgmma) on a GPU: every template issues MMA",
    ),
    ContextRule(
        r"triton_tem_",
        ("fp32",),
        True,
        YES,
        "FP32 run with TF32 allowed: Inductor's templates pass allow_tf32 to tl.dot, "
        "which then issues TF32 MMA",
    ),
    ContextRule(
        r"triton_tem_",
        ("fp32",),
        False,
        NO,
        "FP32 run with TF32 off: tl.dot in IEEE FP32 runs on FFMA",
    ),
)


@dataclass(frozen=True)
class KernelClass:
    category: str
    tensor_core: str
    tensor_core_rule: str  # the pattern that decided Tensor Core use
    tensor_core_why: str  # and its source note


def classify(name: str, context: RunContext | None = None) -> KernelClass:
    """Category and Tensor Core verdict of one kernel name, with the deciding rule. Where the
    name alone says "unknown", the run's context (precision, TF32) may decide."""
    own, qualified = own_name(name)
    category: Rule | None = None
    tensor_core: Rule | None = None
    for rule in RULES:
        if category is not None and tensor_core is not None:
            break
        if (rule.category is None or category is not None) and (
            rule.tensor_core is None or tensor_core is not None
        ):
            continue
        if rule.matches(own, qualified):
            if rule.category is not None and category is None:
                category = rule
            if rule.tensor_core is not None and tensor_core is None:
                tensor_core = rule
    category = category or _OTHER
    if tensor_core is None:
        tensor_core = (
            _MATRIX_DEFAULT if category.category in MATRIX_CATEGORIES else _NON_MATRIX_DEFAULT
        )
    # both chosen for their opinion (or a default with one): neither is None
    category_name, verdict = category.category, tensor_core.tensor_core
    assert category_name is not None and verdict is not None
    if verdict == UNKNOWN and context is not None and context.precision:
        for by_run in CONTEXT_RULES:
            if (
                context.precision in by_run.precisions
                and (by_run.tf32 is None or by_run.tf32 == bool(context.tf32))
                and _compile(by_run.pattern).search(own)
            ):
                tf32 = "" if by_run.tf32 is None else f", TF32 {'on' if context.tf32 else 'off'}"
                return KernelClass(
                    category=category_name,
                    tensor_core=by_run.tensor_core,
                    tensor_core_rule=f"{by_run.pattern} + run precision {context.precision}{tf32}",
                    tensor_core_why=f"{by_run.source} ({context.source})",
                )
    return KernelClass(
        category=category_name,
        tensor_core=verdict,
        tensor_core_rule=tensor_core.pattern or "(default)",
        tensor_core_why=tensor_core.source,
    )


# ---- short, readable kernel names --------------------------------------------------------

_TEMPLATE = re.compile(r"<[^<>]*>")
_PARENS = re.compile(r"\([^()]*\)")


_HINT = re.compile(
    r"([A-Za-z][A-Za-z0-9_]*(?:Functor|functor|Ops|_kernel_impl|_kernel_cuda|"
    r"_device_to_device))\b"
)
_GENERIC = re.compile(r"elementwise_kernel|reduce_kernel|index_elementwise")


def short_name(name: str, width: int = 60) -> str:
    """``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
    ``at::native::vectorized_elementwise_kernel``; cutlass ``Kernel<cutlass_80_...>`` keeps the
    inner name, which is the informative part."""
    text = name.strip().replace("(anonymous namespace)::", "")
    if text.startswith("void "):
        text = text[5:]
    inner = re.match(r"^(?:cutlass::)?Kernel2?<([A-Za-z0-9_]+)", text)
    if inner:
        text = inner.group(1)
    else:
        for _ in range(20):  # strip nested templates and argument lists from the inside out
            stripped = _PARENS.sub("", _TEMPLATE.sub("", text))
            if stripped == text:
                break
            text = stripped
        text = text.split(" ")[-1] if " " in text and "::" in text.split(" ")[-1] else text
        text = text.strip()
        if _GENERIC.search(text):  # ATen's generic kernels: the functor is the informative part
            hints = [h for h in _HINT.findall(name) if h not in ("func_wrapper_t",)]
            if hints:
                text = f"{text} [{hints[0]}]"
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text or name[:width]


#: the width every table column of kernel names is given (views show it whole)
SHORT_WIDTH = 48


def middle_ellipsis(text: str, width: int) -> str:
    """``head…tail`` in ``width`` characters: the tail of a kernel name (tile sizes, knob and
    stage numbers) is what tells two cuDNN or CUTLASS variants apart."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[-tail:]


_REPEATED = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]+)((?:_\1)+)(?![A-Za-z0-9])")


def fold_repeats(text: str) -> str:
    """``convFwd_pointwise_pointwise_pointwise_knob`` -> ``convFwd_pointwise×3_knob``."""
    return _REPEATED.sub(lambda m: f"{m.group(1)}×{m.group(0).count('_') + 1}", text)


def distinct_short_names(given: Iterable[object], width: int = SHORT_WIDTH) -> list[str]:
    """short_name of each full name, made distinct where different full names would share one:
    first the template-folded name with repeated words counted (``pointwise×3``), shown from
    the word where the colliding names start to differ, then the raw name the same way (each
    again for the names that still collide, whose common part is longer), and where even that
    collides a ``#k`` suffix in order of appearance."""
    names = [str(n) for n in given]
    shorts = [short_name(n, width) for n in names]
    for fold in (
        lambda n: fold_repeats(short_name(n, 10**6)),
        lambda n: n.strip().removeprefix("void "),
    ):
        for _ in range(_NARROWING):
            groups = _collisions(names, shorts)
            for indices in groups:
                folded = [fold(names[i]) for i in indices]
                for i, text in zip(indices, _from_first_difference(folded, width)):
                    shorts[i] = text
            if not groups:
                break
    for indices in _collisions(names, shorts):
        for k, i in enumerate(indices, start=1):
            suffix = f" #{k}"
            shorts[i] = middle_ellipsis(shorts[i], width - len(suffix)) + suffix
    return shorts


#: passes over the names that still collide, each group narrower than the last
_NARROWING = 4


def _from_first_difference(texts: list[str], width: int, head: int = 12) -> list[str]:
    """Each text in ``width``: its first ``head`` characters, an ellipsis, then the text from the
    word where the group starts to differ, cut at its end where still too long (the words
    that tell the group apart, ``knob_23`` against ``knob_21``, stay)."""
    common = os.path.commonprefix(texts)
    start = common.rfind("_") + 1 if "_" in common else len(common)
    room = width - head - 1
    out = []
    for text in texts:
        if len(text) <= width:
            out.append(text)
            continue
        rest = text[start:] if start > head else text[head:]
        out.append(text[:head] + "…" + (rest if len(rest) <= room else rest[: room - 1] + "…"))
    return out


def _collisions(names: list[str], shorts: list[str]) -> list[list[int]]:
    """Index groups that share a short name but not a full name."""
    groups: dict[str, list[int]] = {}
    for i, short in enumerate(shorts):
        groups.setdefault(short, []).append(i)
    return [idx for idx in groups.values() if len({names[i] for i in idx}) > 1]
