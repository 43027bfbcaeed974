"""Static rules for candidate CUDA sources, checked before anything is compiled, and again on
the compiled object's symbols, which macros and token pasting cannot disguise.

Each rule names a way kernels have been seen to game a benchmark: work on a stream the
timer does not see, L2 persistence that keeps the inputs warm between timed calls, device
limits that outlive the call, TF32 or half precision passed off as fp32, file or
environment access (to find answers or forge timings), and touching the timers. A
rejection names its rule, the line and the text that broke it, so a model can fix it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    name: str
    why: str
    source: str  # regex over the source, comments removed
    symbols: str = ""  # regex over undefined symbols of the compiled object (fullmatch)
    fp32_only: bool = False  # applies only when the task's data is fp32


RULES = (
    Rule(
        "side-stream",
        "work on a stream of its own escapes the timing events: launch on the default stream",
        r"\bcudaStream(Create\w*|PerThread|NonBlocking|BeginCapture\w*)\b|\bcudaGraph\w*"
        r"|\bcuStream\w*|\bcudaLaunch\w*|\bCUDA_API_PER_THREAD_DEFAULT_STREAM\b"
        r"|<<<[^<>;]*,[^<>;]*,[^<>;]*,(?!\s*(0|nullptr|NULL)\s*>>>)[^<>;]*>>>",
        r"cudaStreamCreate\w*|cudaStreamBeginCapture\w*|cudaGraph\w*|cuStream\w*"
        r"|cudaLaunch(Kernel|KernelExC|CooperativeKernel|HostFunc)\w*|\w+_pt(sz|ds)",
    ),
    Rule(
        "l2-persistence",
        "persisting-L2 windows keep data in cache across timed calls, which the flush must undo",
        r"\b(cuda)?[aA]ccessPolicyWindow\b|\bcudaAccessProperty\w*|\bcudaLimitPersisting\w*"
        r"|\bcudaStreamSetAttribute\b|\bcudaCtxResetPersistingL2Cache\b|\bcudaStreamAttr\w*"
        r"|\bcudaLaunchAttribute\w*",
        r"cudaStreamSetAttribute|cudaCtxResetPersistingL2Cache|cudaGraphKernelNodeSetAttribute",
    ),
    Rule(
        "device-limits",
        "device-wide settings (cudaDeviceSetLimit and friends) outlive the call and change "
        "what the reference is timed under",
        r"\bcudaDeviceSet\w+|\bcudaDeviceReset\b|\bcudaSetDevice\w*|\bcudaMemPoolSet\w+"
        r"|\bcuCtxSet\w+",
        r"cudaDeviceSet\w+|cudaDeviceReset|cudaSetDevice\w*|cudaMemPoolSet\w+|cuCtxSet\w+",
    ),
    Rule(
        "tf32",
        "TF32 keeps 10 mantissa bits: it is not fp32 arithmetic",
        r"tf32|TF32|\bcublasSetMathMode\b|\bCUBLAS_\w*TENSOR_OP\w*",
        r"cublas\w*|cudnn\w*",
    ),
    Rule(
        "downcast",
        "half, bfloat16 or fp8 arithmetic (and tensor-core MMA on them) in an fp32 task "
        "trades the accuracy the task asks for",
        r"cuda_(fp16|bf16|fp8|fp6|fp4)|\bmma\.h\b|\bwmma\b|\bnvcuda\b|\b__half2?\b"
        r"|__nv_(bfloat16|fp8|fp6|fp4)\w*|__float2(half|bfloat16)\w*|__floats?2half2\w*"
        r"|\.(f16|bf16|e4m3|e5m2)(x2)?\b|\bmma\.sync\b",
        fp32_only=True,
    ),
    Rule(
        "file-env",
        "kernels read only their arguments: no files, environment, processes or dynamic loading",
        r"\bf?open(64|at)?\s*\(|\bfreopen|\bfdopen|\bcreat\s*\(|\b(secure_)?getenv\b"
        r"|\b(set|put|unset|clear)env\b|\benviron\b|\bsystem\s*\(|\bpopen\b|\bv?fork\s*\("
        r"|\bexec[lv]p?e?\s*\(|\bposix_spawn\w*|\bdl(open|sym|vsym)\b|\bsyscall\s*\("
        r"|\b[io]?fstream\b|\bfilebuf\b|/proc/|/dev/|\bcudaGetDriverEntryPoint\w*"
        r"|\bcuGetProcAddress\w*|<(unistd\.h|fcntl\.h|dlfcn\.h|fstream|filesystem|sys/\w+\.h)>",
        r"f?open(64)?|openat(64)?|freopen(64)?|fdopen|creat(64)?|(secure_)?getenv"
        r"|(set|put|unset|clear)env|_?_?environ|system|popen|v?fork|exec[lv]p?e?"
        r"|posix_spawnp?|dl(open|sym|vsym)|syscall|ptrace|mprotect|mmap(64)?|readlink|unlink"
        r"|remove|rename|cudaGetDriverEntryPoint\w*|cuGetProcAddress\w*|\w*basic_[io]?fstream\w*"
        r"|\w*basic_filebuf\w*|\w*filesystem\w*",
    ),
    Rule(
        "timer",
        "the runner owns the clocks: events, host timers and the profiler API are off limits",
        r"\bcudaEvent\w*|\bcuEvent\w*|\bclock_gettime\b|\bgettimeofday\b|\bchrono\b"
        r"|<(time\.h|ctime|sys/time\.h)>|\bcudaProfiler\w*|\bcuProfiler\w*|\bnvtx\w*",
        r"cudaEvent\w*|cuEvent\w*|clock_gettime|gettimeofday|time|clock|timespec_get"
        r"|cudaProfiler\w*|cuProfiler\w*|\w*chrono\w*|nvtx\w*",
    ),
)

INCLUDES = re.compile(r"^\s*#\s*include\s*(?P<what>[<\"][^>\"]*[>\"])", re.MULTILINE)
ALLOWED_INCLUDES = re.compile(
    r"<(cuda_runtime\.h|cuda_runtime_api\.h|cuda\.h|device_launch_parameters\.h|math\.h|cmath"
    r"|float\.h|cfloat|stdlib\.h|cstdlib|stdint\.h|cstdint|stddef\.h|cstddef|limits\.h|climits"
    r"|stdio\.h|cstdio"
    r"|math_constants\.h|cooperative_groups\.h|cooperative_groups/\w+\.h|cuda_pipeline\.h"
    r"|cuda_fp16\.h|cuda_bf16\.h|mma\.h|cuda/\w+|cub/[\w/]+\.cuh)>"
)
COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


@dataclass(frozen=True)
class Violation:
    rule: str
    why: str
    line: int  # 0: found in the compiled object, not the source
    text: str

    def describe(self) -> str:
        where = f"line {self.line}" if self.line else "compiled object calls"
        return f"[{self.rule}] {where}: `{self.text}`: {self.why}"


def _blank_comments(source: str) -> str:
    """Comments become spaces (newlines kept), so line numbers still point at the source."""
    return COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), source)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def check_source(source: str, *, fp32: bool) -> list[Violation]:
    """Every rule the source breaks (first hit per rule), includes and token pasting too."""
    text = _blank_comments(source)
    found: list[Violation] = []
    for rule in RULES:
        if rule.fp32_only and not fp32:
            continue
        match = re.search(rule.source, text)
        if match:
            found.append(Violation(rule.name, rule.why, _line(text, match.start()), match.group()))
    for include in INCLUDES.finditer(text):
        if not ALLOWED_INCLUDES.fullmatch(include["what"]):
            why = "only CUDA, math and libc++ utility headers may be included (no local files)"
            found.append(Violation("include", why, _line(text, include.start()), include["what"]))
    pasting = text.find("##")
    if pasting >= 0:
        why = "token pasting could assemble a forbidden name out of innocent parts"
        found.append(Violation("token-pasting", why, _line(text, pasting), "##"))
    return found


def check_symbols(undefined: list[str], *, fp32: bool) -> list[Violation]:
    """The rules broken by what the compiled object calls (its undefined symbols)."""
    found: list[Violation] = []
    for rule in RULES:
        if not rule.symbols or (rule.fp32_only and not fp32):
            continue
        hits = [name for name in undefined if re.fullmatch(rule.symbols, name)]
        if hits:
            found.append(Violation(rule.name, rule.why, 0, ", ".join(sorted(set(hits)))))
    return found


# C++ names a candidate may not define: the standard library's, and operator new/delete,
# which the runner's process uses too (defining them would interpose on it).
RESERVED_MANGLED = re.compile(r"_Z(St|NSt|NKSt|nw|na|dl|da|N9__gnu_cxx|NK9__gnu_cxx|N10__cxxabi)")
HARMLESS = {"DW.ref.__gxx_personality_v0"}


def foreign_definitions(defined: list[str], entry: str) -> list[str]:
    """Global symbols the candidate may not define: any C name but the entry point (it could
    replace a CUDA or libc function the runner calls), and reserved C++ names."""
    return sorted(
        name
        for name in set(defined)
        if name != entry
        and name not in HARMLESS
        and (not name.startswith("_Z") or RESERVED_MANGLED.match(name))
    )
