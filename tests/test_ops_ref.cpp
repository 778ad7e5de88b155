// The op families' fp32 host references (kernels/<family>.h, backend/cpu/ops.h) against fixed,
// hand-computed values, in every build (CI has no GPU). The CUDA suites under tests/cuda/ops/
// run the same cases beside the kernel-against-reference checks.
#include "ops/activation_ref.h"
#include "ops/embed_ref.h"
#include "ops/linear_ref.h"
#include "ops/mlp_activation_ref.h"
#include "ops/norm_ref.h"
#include "ops/positions_ref.h"
#include "ops/rope_attention_ref.h"
