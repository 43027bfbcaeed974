"""The C++ route's build: the candidate's policy.cpp and the trusted advisor, linked into a
clang-19 pass plugin in the sandbox.

The advisor (advisor.cpp, heavy on LLVM headers, ~4 s) is compiled once per evaluator in a
run with no candidate code, and its object is reused; each candidate then costs one small
compile and a link. The link resolves every symbol against libLLVM (`-z defs`), so a policy
that leaves shouldInline undefined fails here, with the linker's words, rather than when
clang cannot load the plugin. The plugin only ever runs in a decide run.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from evolve.evaluators.llvm_inline.params import LLVMInlineParams
from evolve.plugin.program import Program
from evolve.plugin.stages import Runner, StageFailed, excerpt

HERE = Path(__file__).parent
ADVISOR = (HERE / "advisor.cpp").read_bytes()
HEADER = (HERE / "evolve_inline.h").read_bytes()
PLUGIN = "candidate/plugin.so"  # where the decide run finds it


def _cxx(params: LLVMInlineParams) -> str:
    """The compile command's head; llvm-config supplies the flags libLLVM was built with."""
    config = shlex.quote(params.llvm_config)
    return f"{shlex.quote(params.cxx)} $({config} --cxxflags) -fPIC -O2 -I."


def build_advisor(run: Runner, params: LLVMInlineParams) -> bytes:
    """The trusted advisor's object file; an error here is the image's fault, not a policy's."""
    script = f"set -e; {_cxx(params)} -c advisor.cpp -o advisor.o"
    files = {"advisor.cpp": ADVISOR, "evolve_inline.h": HEADER}
    result = run(["sh", "-c", script], files, collect=["advisor.o"])
    if not result.ok or "advisor.o" not in result.files:
        raise RuntimeError(
            f"the advisor plugin does not build with {params.cxx} and {params.llvm_config} "
            f"(is llvm-19-dev in the sandbox image?): {result.describe()}\n"
            + excerpt(result.stderr, tail=True)
        )
    return result.files["advisor.o"]


def build_plugin(run: Runner, params: LLVMInlineParams, advisor: bytes, program: Program) -> bytes:
    """The candidate's plugin.so; StageFailed with the compiler's message if it does not
    compile or link."""
    sources = [path for path in program.files if path.endswith((".cpp", ".cc", ".cxx"))]
    if not sources:
        raise StageFailed("the C++ route needs the policy as a .cpp file defining shouldInline")
    config = shlex.quote(params.llvm_config)
    objects = []
    commands = ["set -e"]
    for index, path in enumerate(sources):
        objects.append(f"policy{index}.o")
        commands.append(f"{_cxx(params)} -c {shlex.quote('candidate/' + path)} -o {objects[-1]}")
    commands.append(
        f"{shlex.quote(params.cxx)} -shared advisor.o {' '.join(objects)} -o {PLUGIN} "
        f"$({config} --ldflags) -lLLVM-19 -Wl,-z,defs"
    )
    files = {f"candidate/{path}": text for path, text in program.as_bytes().items()}
    files |= {"advisor.o": advisor, "evolve_inline.h": HEADER}
    result = run(["sh", "-c", "; ".join(commands)], files, collect=[PLUGIN])
    if result.timed_out:
        raise StageFailed(f"building the plugin {result.describe()}", timed_out=True)
    if not result.ok or PLUGIN not in result.files:
        message = excerpt(result.stderr) or result.describe()
        raise StageFailed(f"the policy does not build:\n{message}")
    return result.files[PLUGIN]
