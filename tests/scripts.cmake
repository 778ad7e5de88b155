# Tests driven by scripts: the CLI end to end and the live HF reference check.

# A freshly drawn random tiny checkpoint each run, goldens from the real transformers
# LlamaModel, checked against the cpu backend — not only the frozen files in testdata/.
add_test(NAME hf_live
  COMMAND ${CMAKE_SOURCE_DIR}/tests/hf_live.sh ${LOOM_PYTHON} ${CMAKE_BINARY_DIR})
set_tests_properties(hf_live PROPERTIES LABELS "cpu;hf" TIMEOUT 900)

# The Python package (python/) against this build's binary on the tiny models, from the source
# tree (not installed); ctest reports Skipped where LOOM_PYTHON lacks numpy or safetensors.
add_test(NAME python_package
  COMMAND ${CMAKE_SOURCE_DIR}/python/tests/ctest.sh ${LOOM_PYTHON})
set_tests_properties(python_package PROPERTIES LABELS "cpu;python" SKIP_RETURN_CODE 77
  TIMEOUT 600 ENVIRONMENT "LOOM_BIN=${CMAKE_BINARY_DIR}/bin/loom;PYTHONPATH=${CMAKE_SOURCE_DIR}/python")

# Install to a temporary prefix and run the installed loom from elsewhere, with and without its
# CUDA module; labelled cuda too, so that `ctest -L cuda` on a GPU machine runs it there.
add_test(NAME test_install COMMAND ${CMAKE_SOURCE_DIR}/tests/test_install.sh ${CMAKE_BINARY_DIR}
  ${CMAKE_SOURCE_DIR} ${LOOM_HAVE_CUDA})
set_tests_properties(test_install PROPERTIES LABELS "cpu;cuda;install" TIMEOUT 300)
