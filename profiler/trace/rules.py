"""Kernel category and Tensor Core rules: one table of data.

Each row is a regular expression searched (case-insensitively) in the full kernel name, with an
opinion on the category, on Tensor Core use, or on both, and a note saying where the naming
convention comes from. For each kernel the first row with an opinion decides that question, so
more specific rows come first. Adding a GPU generation or a library is adding rows.

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
from dataclasses import dataclass
from functools import lru_cache

CATEGORIES = ("GEMM", "convolution", "attention", "elementwise", "reduction", "normalization",
              "copy", "memset", "communication", "other")
MATRIX_CATEGORIES = ("GEMM", "convolution", "attention")

YES, NO, UNKNOWN = "yes", "no", "unknown"


@dataclass(frozen=True)
class Rule:
    pattern: str
    category: str | None = None     # None: no opinion, a later row decides
    tensor_core: str | None = None  # "yes" / "no" / "unknown" / None (no opinion)
    source: str = ""                # where the naming convention comes from

    @property
    def regex(self) -> re.Pattern:
        return _compile(self.pattern)


@lru_cache(maxsize=None)
def _compile(pattern: str) -> re.Pattern:
    return re.compile(pattern, re.IGNORECASE)


# Type tokens of NVIDIA's xmma/cutlass names: <A><B>_<C><accumulator>, e.g. f16f16_f16f32.
_TC_INPUT = r"(?:f16|bf16|tf32|e4m3|e5m2|fp8|i8|s8|u8|i4|int8)"
# cuBLAS nvjet names carry three BLAS precision letters (A/B input, compute, output), e.g.
# nvjet_sm90_hsh_...: h = FP16, b = BF16, t = TF32, e/q = FP8 flavours, i = INT8, s = FP32,
# d = FP64. The input letter decides. FP32 inputs with FP32 compute ("sss") are not Tensor Core
# work: with TF32 allowed cuBLAS picks the "tst" kernels instead. (Decided from the letters;
# to be pinned against Nsight Compute on the GPU traces, issue point 8.)
_NVJET_TC = r"nvjet_(?:sm\d+_|tst_|[a-z]{3}_)?(?:[hbteqi][a-z]{2})_"

RULES: tuple[Rule, ...] = (
    # ---- communication: never Tensor Core ------------------------------------------------
    Rule(r"nccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|cross_device_reduce",
         "communication", NO, "NCCL kernels are ncclKernel_*/ncclDevKernel_*; custom all-reduce "
         "kernels (vLLM, TensorRT-LLM) say so in their names"),
    # ---- TensorRT --------------------------------------------------------------------
    Rule(r"^__myl_(?:Resh|Add|Relu|Move|Conc|Mul|Mean|Tran|Slic|Cast|Sub|Div|Sum|Max|Min|Exp|"
         r"Sigm|Tanh|Gelu|Silu|Erf|Pow|Sqrt|Rsqr|Neg|Abs|Copy|Gath|Pad)+_", tensor_core=NO,
         source="TensorRT Myelin kernels spell their fused ops in the name (__myl_ReshAddRelu = "
         "reshape+add+relu); with only pointwise, reduction and data-movement ops there is no "
         "MMA (Nsight Compute on an H200: 0.5 % tensor-pipe activity for __myl_ReshAddRelu)"),
    Rule(r"^__myl_|myelin", tensor_core=UNKNOWN,
         source="other TensorRT Myelin fused kernels (__myl_*): no type evidence in the name"),

    # ---- torch.compile (Inductor) Triton kernels -------------------------------------------
    Rule(r"triton_tem_fused_.*conv", "convolution", UNKNOWN,
         "Inductor template conv: tl.dot uses MMA for FP16/BF16 (or TF32) inputs, FFMA for "
         "IEEE FP32; the name does not say which"),
    Rule(r"triton_tem_", "GEMM", UNKNOWN,
         "Inductor template (mm/bmm/addmm, max-autotune): MMA only for FP16/BF16/TF32 inputs; "
         "the name does not carry the dtype, so unknown without other evidence"),
    Rule(r"triton_poi_", "elementwise", NO, "Inductor pointwise kernels: no tl.dot"),
    Rule(r"triton_(?:red|per)_", "reduction", NO, "Inductor (persistent) reductions: no tl.dot"),

    # ---- explicit CUDA-core GEMM markers (checked before any Tensor Core pattern) --------
    Rule(r"(?:^|[^a-z])(?:volta|turing|ampere|maxwell|pascal|sm\d+)?_?sgemm|_sgemm_|implicit_convolve_sgemm",
         tensor_core=NO, source="cuBLAS/cuDNN 'sgemm': FP32 FFMA kernels on the CUDA cores "
         "(ampere_sgemm_*, volta_sgemm_*, implicit_convolve_sgemm)"),
    Rule(r"(?:^|_)dgemm|_zgemm|_cgemm", tensor_core=NO,
         source="cuBLAS FP64/complex legacy kernels; Tensor Core DMMA kernels carry an MMA shape"),
    Rule(r"simt|ffma|scudnn|fp32_?gemm_?fp32", tensor_core=NO,
         source="cutlass 'simt' kernels and cuDNN 'scudnn' (single precision) kernels run FFMA"),
    Rule(r"cudnn_generated_\w*resample", "reduction", NO,
         "cuDNN runtime-compiled resample (pooling) kernels, e.g. "
         "cudnn_generated_resampleFwd_cutlass_* in TensorRT engines: no MMA"),
    Rule(r"cask_cudnn::compute\w*offsets", "other", NO,
         "cuDNN/cask offset-table helper kernels that run before an implicit GEMM"),
    Rule(r"^(?:void )?cudnn::[\w:]+<(?:float|double)\b", tensor_core=NO,
         source="cuDNN's own engines templated on float/double (dgrad_engine<float,...>, "
         "wgrad_alg0_engine<float,...>, winograd_nonfused<float,...>): FFMA kernels"),
    Rule(r"gemv|gemmSN_|gemmk1_|dot_kernel|splitKreduce", tensor_core=NO,
         source="cuBLAS gemv / small-N (gemmSN) / k=1 kernels and the split-K reduction are "
         "CUDA-core kernels"),

    # ---- NVIDIA xmma (cuDNN, cuBLAS, TensorRT): the type letters decide ---------------
    Rule(r"xmma.*?_f32f32_f32f32", tensor_core=NO,
         source="xmma FP32 in/FP32 math (e.g. sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_*): "
         "Nsight Compute shows 0 % tensor-pipe activity on an H200"),
    Rule(rf"xmma.*?_{_TC_INPUT}(?:{_TC_INPUT}|f32|i32)?_", tensor_core=YES,
         source="xmma with FP16/BF16/TF32/FP8/INT8 inputs (f16f16_*, tf32f32_*, bf16bf16_*, "
         "i8i8_*): issues HMMA/IMMA/GMMA; 40-55 % tensor-pipe activity in Nsight Compute (H200)"),
    Rule(r"xmma", tensor_core=UNKNOWN,
         source="'xmma' alone proves nothing: the library also builds FP32 CUDA-core kernels"),

    # ---- Hopper and later --------------------------------------------------------------
    Rule(_NVJET_TC, tensor_core=YES,
         source="cuBLAS(Lt) nvjet kernels (sm90+): the first type letter h/b/t/e/q/i is a "
         "Tensor Core input type"),
    Rule(r"nvjet_(?:sm\d+_)?[sd][a-z]{2}_", tensor_core=NO,
         source="nvjet with FP32 ('sss') or FP64 inputs: no TF32/FP16 inputs for the MMA units"),
    Rule(r"nvjet", "GEMM", UNKNOWN, "nvjet name without readable type letters"),
    Rule(r"wgmma|gmma|warpgroup|warpspecialized|warp_specialized", tensor_core=YES,
         source="Hopper warp-group MMA (wgmma/GMMA) and cutlass 3.x warp-specialized GEMMs"),
    Rule(r"cudnn_generated_fort_native_(?:sdpa|flash)", "attention", YES,
         "cuDNN runtime-compiled (fort native) SDPA/flash kernels: Tensor Core only"),
    Rule(r"cudnn_generated_fort_native.*conv", "convolution", YES,
         "cuDNN runtime-fusion engines (cudnn_generated_fort_native_sm90_convFwd*): the "
         "runtime-fusion engines are built on Tensor Core MMA (FP16/BF16, or TF32 for FP32)"),
    Rule(r"cudnn_generated_fort_native.*mat_?mul", "GEMM", YES,
         "cuDNN runtime-fusion matmul engines (cudnn_generated_fort_native_*matMul*)"),
    Rule(r"cudnn_generated_fort_native", tensor_core=YES,
         source="other cuDNN runtime-fusion engines (Tensor Core MMA)"),

    # ---- Volta / Turing / Ampere cuBLAS, cuDNN, cutlass names --------------------------
    Rule(r"[a-z_](?:884|1684|1688|16816|16832|8816|8832|168256)(?:gemm|cudnn|conv|_|[a-z])",
         tensor_core=YES, source="MMA instruction shape after a type letter: volta_h884gemm, "
         "turing_fp16_s1688gemm, ampere_s16816gemm, i8816 (PyProf/TensorBoard plugin list, "
         "cuBLAS/cuDNN kernel naming)"),
    Rule(r"hmma|imma|dmma|tensorop|wmma|mma_sync|tensor_?core", tensor_core=YES,
         source="HMMA/IMMA/DMMA instruction names; cutlass 'tensorop' and 'wmma' kernels"),

    # ---- attention ---------------------------------------------------------------------
    Rule(r"fmha.*(?:f32|fp32)(?!_?acc)|cutlassF_f32|cutlassB_f32", "attention", NO,
         "memory-efficient attention (xformers/cutlass fmha) FP32 variants run on CUDA cores"),
    Rule(r"flash_?(?:fwd|bwd|attn|attention)|fmha|mha_|_mha|sdpa|attention|flash_kernel",
         "attention", YES, "FlashAttention/cutlass fmha/TensorRT mha kernels: FP16/BF16 only, "
         "built on mma.sync/wgmma"),

    # ---- data movement (after the library rows, so "transpose" in a GEMM name is harmless)
    Rule(r"memset|fill_kernel|zero_?kernel", "memset", NO,
         "device-side memset kernels (cuBLAS/cuDNN workspace clears)"),
    Rule(r"memcpy|copy_?kernel|copypacked|genericreformat|reformat|catarray|concat|"
         r"transpose|permute|copy_|gather_kernel|scatter_kernel|index_kernel|nchwtonhwc|nhwctonchw",
         "copy", NO, "data-movement kernels: ATen copy_/cat/index, TensorRT reformat (genericReformat)"),

    # ---- categories of the remaining kernels ---------------------------------------------
    Rule(r"conv|fprop|dgrad|wgrad|winograd|implicit_?gemm|im2col|col2im|depthwise|precomputed|"
         r"scudnn|hcudnn|\dcudnn",
         "convolution", source="cuDNN/cutlass/ATen convolution kernels (fprop/dgrad/wgrad, "
         "implicit GEMM, winograd, im2col; cuDNN's volta_scudnn_*/turing_h1688cudnn_*)"),
    Rule(r"gemm|matmul|mat_mul|nvjet|cutlass|_mm_|bmm|addmm|cublas|splitk|_gemm",
         "GEMM", source="cuBLAS/cutlass GEMM kernels"),
    Rule(r"norm|bn_fw|bn_bw|batch_?norm|layer_?norm|rms|welford|instance_?norm|group_?norm",
         "normalization", source="ATen/cuDNN/apex normalization kernels"),
    Rule(r"reduce|softmax|sum_|_sum|mean|argmax|argmin|max_pool|avg_pool|pool|topk|sort|"
         r"scan|cumsum|norm_kernel|lognorm|criterion|nll_?loss|cross_?entropy", "reduction",
         source="ATen reduce_kernel, softmax, pooling, sort/scan"),
    Rule(r"elementwise|pointwise|functor|vectorized|unrolled|activation|relu|gelu|silu|sigmoid|"
         r"tanh|add|mul|_div|clamp|where|cast|bias|scale", "elementwise",
         source="ATen vectorized/unrolled_elementwise_kernel and fused activations"),
)

_NON_MATRIX_DEFAULT = Rule("", tensor_core=NO, source="no GEMM/convolution/attention pattern in "
                           "the name: elementwise, reduction, copy ... kernels issue no MMA")
_MATRIX_DEFAULT = Rule("", tensor_core=UNKNOWN, source="matrix kernel whose name carries no "
                       "Tensor Core evidence")
_OTHER = Rule("", category="other", source="no rule matched")


@dataclass(frozen=True)
class RunContext:
    """What the run that made a trace says about its arithmetic (its result.json): evidence for
    kernels whose names carry no data type."""

    precision: str | None = None  # the backend's precision: "fp32", "fp16", "bf16"
    tf32: bool | None = None      # whether TF32 was allowed
    source: str = ""              # where this came from, for the rule text


@dataclass(frozen=True)
class ContextRule:
    pattern: str
    precisions: tuple[str, ...]
    tf32: bool | None  # None: either
    tensor_core: str
    source: str


#: Rules that need the run's precision; they apply only where the name alone said "unknown".
CONTEXT_RULES: tuple[ContextRule, ...] = (
    ContextRule(r"triton_tem_", ("fp16", "bf16"), None, YES,
                "Inductor template kernels run tl.dot on the model's dtype; FP16/BF16 operands "
                "issue MMA (HMMA/wgmma)"),
    ContextRule(r"triton_tem_", ("fp32",), True, YES,
                "FP32 run with TF32 allowed: Inductor's templates pass allow_tf32 to tl.dot, "
                "which then issues TF32 MMA"),
    ContextRule(r"triton_tem_", ("fp32",), False, NO,
                "FP32 run with TF32 off: tl.dot in IEEE FP32 runs on FFMA"),
)


@dataclass(frozen=True)
class KernelClass:
    category: str
    tensor_core: str
    tensor_core_rule: str   # the pattern that decided Tensor Core use
    tensor_core_why: str    # and its source note


def classify(name: str, context: RunContext | None = None) -> KernelClass:
    """Category and Tensor Core verdict of one kernel name, with the deciding rule. Where the
    name alone says "unknown", the run's context (precision, TF32) may decide."""
    category: Rule | None = None
    tensor_core: Rule | None = None
    for rule in RULES:
        if category is not None and tensor_core is not None:
            break
        if (rule.category is None or category is not None) and \
                (rule.tensor_core is None or tensor_core is not None):
            continue
        if rule.regex.search(name):
            if rule.category is not None and category is None:
                category = rule
            if rule.tensor_core is not None and tensor_core is None:
                tensor_core = rule
    category = category or _OTHER
    if tensor_core is None:
        tensor_core = _MATRIX_DEFAULT if category.category in MATRIX_CATEGORIES \
            else _NON_MATRIX_DEFAULT
    if tensor_core.tensor_core == UNKNOWN and context is not None and context.precision:
        for rule in CONTEXT_RULES:
            if (context.precision in rule.precisions
                    and (rule.tf32 is None or rule.tf32 == bool(context.tf32))
                    and _compile(rule.pattern).search(name)):
                tf32 = "" if rule.tf32 is None else f", TF32 {'on' if context.tf32 else 'off'}"
                return KernelClass(
                    category=category.category, tensor_core=rule.tensor_core,
                    tensor_core_rule=f"{rule.pattern} + run precision {context.precision}{tf32}",
                    tensor_core_why=f"{rule.source} ({context.source})")
    return KernelClass(category=category.category, tensor_core=tensor_core.tensor_core,
                       tensor_core_rule=tensor_core.pattern or "(default)",
                       tensor_core_why=tensor_core.source)


# ---- short, readable kernel names --------------------------------------------------------

_TEMPLATE = re.compile(r"<[^<>]*>")
_PARENS = re.compile(r"\([^()]*\)")


_HINT = re.compile(r"([A-Za-z][A-Za-z0-9_]*(?:Functor|functor|Ops|_kernel_impl|_kernel_cuda|"
                   r"_device_to_device))\b")
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


def distinct_short_names(names, width: int = SHORT_WIDTH) -> list[str]:
    """short_name of each full name, made distinct where different full names would share one:
    first the template-folded name with repeated words counted (``pointwise×3``) and a middle
    ellipsis, then the raw name with a middle ellipsis, and where even that collides a ``#k`` suffix in order of appearance."""
    names = [str(n) for n in names]
    shorts = [short_name(n, width) for n in names]
    for fold in (lambda n: fold_repeats(short_name(n, 10**6)),
                 lambda n: n.strip().removeprefix("void ")):
        for indices in _collisions(names, shorts):
            folded = [fold(names[i]) for i in indices]
            for i, text in zip(indices, _from_first_difference(folded, width)):
                shorts[i] = text
    for indices in _collisions(names, shorts):
        for k, i in enumerate(indices, start=1):
            suffix = f" #{k}"
            shorts[i] = middle_ellipsis(shorts[i], width - len(suffix)) + suffix
    return shorts


def _from_first_difference(texts: list[str], width: int, head: int = 12) -> list[str]:
    """Each text in ``width``: its first ``head`` characters, an ellipsis, then the text from the
    word where the group starts to differ (middle-cut again where still too long)."""
    common = os.path.commonprefix(texts)
    start = common.rfind("_") + 1 if "_" in common else len(common)
    out = []
    for text in texts:
        if len(text) <= width:
            out.append(text)
            continue
        rest = text[start:] if start > head else text[head:]
        out.append(text[:head] + "…" + middle_ellipsis(rest, width - head - 1))
    return out


def _collisions(names: list[str], shorts: list[str]) -> list[list[int]]:
    """Index groups that share a short name but not a full name."""
    groups: dict[str, list[int]] = {}
    for i, short in enumerate(shorts):
        groups.setdefault(short, []).append(i)
    return [idx for idx in groups.values() if len({names[i] for i in idx}) > 1]
