#include "ampkit/tensor_stats.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/nan_to_num.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <utility>

namespace ampkit {
namespace {

constexpr double kFloat16Max = 65504.0;
constexpr double kFlushToZero = 0x1p-25;  // |x| <= this (and x != 0) becomes 0 in float16
constexpr double kOverflow = 65520.0;     // finite |x| >= this becomes inf in float16

// What a measurement needs on each device, made once per (dtype, device): the bucket edges of
// |x| in its dtype, and where the counts of interest sit among the buckets.
struct Constants {
  at::Tensor edges;  // 0 | (0, 2^-25] flushes to zero | normal | [65520, max] overflows | inf
  at::Tensor picks;  // buckets 4 (inf), 5 (NaN: past the last edge), 1 (underflow), 3 (overflow)
};

template <class T>
at::Tensor edges_in(at::ScalarType dtype) {
  at::Tensor host = at::empty({5}, at::TensorOptions().dtype(dtype));
  T* e = host.data_ptr<T>();
  e[0] = 0;
  e[1] = static_cast<T>(kFlushToZero);
  e[2] = std::nextafter(static_cast<T>(kOverflow), static_cast<T>(0));  // the largest below 65520
  e[3] = std::numeric_limits<T>::max();
  e[4] = std::numeric_limits<T>::infinity();
  return host;
}

const Constants& constants(at::ScalarType dtype, const c10::Device& device) {
  // Never destroyed: device tensors must not be freed after the device's runtime at exit.
  static auto* cache = new std::map<std::tuple<int, int, int>, Constants>();
  static std::mutex mutex;
  const auto key = std::make_tuple(static_cast<int>(dtype), static_cast<int>(device.type()),
                                   static_cast<int>(device.index()));
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache->find(key);
  if (found != cache->end()) return found->second;
  at::Tensor edges = dtype == at::kDouble ? edges_in<double>(dtype) : edges_in<float>(dtype);
  at::Tensor picks = at::empty({4}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = picks.data_ptr<int64_t>();
  p[0] = 4;
  p[1] = 5;
  p[2] = 1;
  p[3] = 3;
  Constants made{edges.to(device), picks.to(device)};
  return cache->emplace(key, std::move(made)).first->second;
}

}  // namespace

at::Tensor tensor_stats(const std::vector<at::Tensor>& tensors) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> rows;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    at::Tensor a = at::abs(t.detach());
    if (a.scalar_type() != at::kFloat && a.scalar_type() != at::kDouble) a = a.to(at::kFloat);
    const Constants& c = constants(a.scalar_type(), a.device());
    const at::Tensor amax =
        at::nan_to_num(a, 0.0, std::numeric_limits<double>::infinity(), std::nullopt).amax();
    const at::Tensor index = at::searchsorted(c.edges, a.reshape(-1));
    at::Tensor counts;
    if (index.device().is_cpu()) {
      counts = at::bincount(index, {}, 6);
    } else {  // bincount reads its maximum to the host there
      const auto longs = at::TensorOptions().dtype(at::kLong).device(index.device());
      counts = at::zeros({6}, longs).scatter_add_(0, index, at::ones({}, longs).expand_as(index));
    }
    const auto type = a.device().type() == c10::DeviceType::MPS ? at::kFloat : at::kDouble;
    rows.push_back(at::cat({amax.reshape(1).to(type), counts.index_select(0, c.picks).to(type)}));
  }
  if (rows.empty()) return at::Tensor();
  if (rows.size() == 1) return rows.front();
  const at::Tensor all = at::stack(rows);
  return at::cat({all.slice(1, 0, 1).amax(0), all.slice(1, 1).sum(0)});
}

double float16_headroom(double amax) {
  if (amax == 0.0) return std::numeric_limits<double>::infinity();
  if (std::isinf(amax)) return -std::numeric_limits<double>::infinity();
  return std::log2(kFloat16Max / amax);
}

double StatsRow::underflow() const {
  return numel ? static_cast<double>(underflow_count) / static_cast<double>(numel) : 0.0;
}

double StatsRow::overflow() const {
  return numel ? static_cast<double>(overflow_count) / static_cast<double>(numel) : 0.0;
}

void StatsSummary::add(int64_t step, const std::string& pass, const std::string& module,
                       const std::string& dtype, int64_t numel,
                       const std::array<double, 5>& values) {
  const auto key = std::make_tuple(step, pass, module);
  auto found = index_.find(key);
  if (found == index_.end()) {
    StatsRow row;
    row.step = step;
    row.module = module;
    row.pass = pass;
    row.dtype = dtype;
    rows_.push_back(std::move(row));
    found = index_.emplace(key, rows_.size() - 1).first;
  }
  StatsRow& row = rows_[found->second];
  row.calls += 1;
  row.numel += numel;
  row.amax = std::max(row.amax, values[0]);
  row.inf += static_cast<int64_t>(values[1]);
  row.nan += static_cast<int64_t>(values[2]);
  row.underflow_count += static_cast<int64_t>(values[3]);
  row.overflow_count += static_cast<int64_t>(values[4]);
  if (values[1] != 0.0 || values[2] != 0.0) first_.emplace(std::make_pair(step, pass), module);
}

std::vector<StatsRow> StatsSummary::rows() const {
  std::vector<StatsRow> out = rows_;
  std::stable_sort(out.begin(), out.end(),
                   [](const StatsRow& a, const StatsRow& b) { return a.step < b.step; });
  return out;
}

std::optional<std::string> StatsSummary::first_nonfinite(int64_t step,
                                                         const std::string& pass) const {
  auto found = first_.find(std::make_pair(step, pass));
  if (found == first_.end()) return std::nullopt;
  return found->second;
}

}  // namespace ampkit
