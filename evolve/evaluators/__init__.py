"""The evaluators shipped with evolve, each a plugin registered under the
"evolve.evaluators" entry points as any other package's would be (evolve/plugin/registry.py):
python (an OpenEvolve-style evaluate()), command, c_kernel, cuda_kernel, code_layout,
llvm_inline and synthetic. They import only the plugin toolkit (evolve/plugin/)."""
