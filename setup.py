"""spec_ops: pip install . (no compiled C++; the Triton kernels JIT-compile on first use)."""

from setuptools import setup

setup(
    name="spec_ops",
    version="0.1.0",
    description="Speculative-decoding operators as torch.ops.spec_ops.* (Triton on CUDA, "
                "vectorized torch on CPU)",
    python_requires=">=3.10",
    # The Triton kernels live in csrc_triton/ and ship inside the package as spec_ops._triton
    # (an editable install, `pip install -e .`, maps spec_ops._triton to csrc_triton/ too).
    packages=["spec_ops", "spec_ops._triton"],
    package_dir={"spec_ops": "spec_ops", "spec_ops._triton": "csrc_triton"},
    # The floor is tested: .ci/run also runs the suite on torch 2.11.0 + triton 3.6.0 (`make
    # test-floor`), the versions of the GPU machine the benchmarks ran on.
    install_requires=["torch>=2.11", "triton>=3.6"],
    extras_require={
        "test": ["pytest>=8", "pytest-xdist>=3", "hypothesis>=6.100", "expecttest>=0.2", "numpy"],
        "bench": ["matplotlib"],
    },
)
