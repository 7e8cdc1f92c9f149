// test/shm/shm_test_data.h — inputs every rank can compute for every other rank, and the
// exact result the shared-memory engine must produce from them.
//
// Each rank's values come from (seed, rank, index), so any rank can recompute all ranks'
// inputs and fold them itself in the engine's documented order (rank 0 first, reduce_pair
// from the left, prescale before, apply_postscale after; fp16/bf16 in float32 with one
// rounding at the end). The engine's result must equal
// that reference bit for bit, for every dtype — a much stricter check than a tolerance.
// Values are small (int8: |x| <= 5, so sums of 4 ranks scaled by 2 and 3 fit; products of
// <= 4 ranks) so integer ops never overflow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/types.h"
#include "ops/shm/shm_group.h"

namespace kolo::shm::testing {

inline constexpr DType kAllDTypes[] = {DType::kUInt8,   DType::kInt8,     DType::kInt16,
                                       DType::kInt32,   DType::kInt64,    DType::kFloat16,
                                       DType::kBFloat16, DType::kFloat32, DType::kFloat64};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                       ReduceOp::kMax, ReduceOp::kProduct};

// Rank `rank`'s input for (seed, dtype, op): `count` elements as raw bytes.
std::vector<std::byte> make_input(uint64_t seed, int rank, size_t count, DType dtype, ReduceOp op);

// The result all ranks must hold after allreduce over `nranks` ranks.
std::vector<std::byte> reference_allreduce(uint64_t seed, int nranks, size_t count, DType dtype,
                                           ReduceOp op, double prescale, double postscale);

// "" when a == b bitwise; else where they first differ (element index and both values).
std::string first_difference(const std::vector<std::byte>& got,
                             const std::vector<std::byte>& want, DType dtype);

// Element i of `buf` as a double (for messages and tolerance checks).
double element(const std::byte* buf, size_t i, DType dtype);

// Runs g.allreduce on this rank's input (split into `pieces` pieces, listed out of order) and
// compares with reference_allreduce bitwise. Returns "" or what differed, with the case.
std::string check_allreduce(ShmGroup& g, uint64_t seed, size_t count, DType dtype, ReduceOp op,
                            double prescale, double postscale, int pieces = 1);

// 64-bit FNV-1a of a byte range (ranks compare hashes to prove identical results).
uint64_t hash_bytes(const void* p, size_t n);

}  // namespace kolo::shm::testing
