// The overflow locator's statistics (tensor_stats.h) against what a cast to float16 does, on each
// device type (device_test.h), and the precision policies' region stack (policy_region.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>

#include "ampkit/errors.h"
#include "ampkit/policy_region.h"
#include "ampkit/tensor_stats.h"
#include "device_test.h"

namespace {

const double inf = std::numeric_limits<double>::infinity();
const double nan = std::numeric_limits<double>::quiet_NaN();

class TensorStats : public ampkit_test::DeviceTest {
 protected:
  // The reference: [amax, inf, nan, underflow, overflow] from comparisons and a real cast.
  std::vector<double> reference(const at::Tensor& t) const {
    const at::Tensor x = t.to(at::kDouble).cpu();
    const at::Tensor half = t.to(at::kHalf).cpu();
    const at::Tensor finite = at::isfinite(x);
    const at::Tensor a = at::where(at::isnan(x), at::zeros_like(x), x.abs());
    return {a.max().item<double>(), at::isinf(x).sum().item<double>(),
            at::isnan(x).sum().item<double>(),
            ((x != 0) & finite & (half == 0)).sum().item<double>(),
            (finite & at::isinf(half)).sum().item<double>()};
  }
  std::vector<double> measured(const std::vector<at::Tensor>& tensors) const {
    const at::Tensor stats = ampkit::tensor_stats(tensors).cpu();
    EXPECT_EQ(stats.scalar_type(), at::kDouble);
    EXPECT_EQ(stats.numel(), 5);
    return {stats.data_ptr<double>(), stats.data_ptr<double>() + 5};
  }
  at::Tensor values(at::ScalarType dtype) const {
    const double tiny = std::ldexp(1.0, -25);
    const std::vector<double> v = {0.0,
                                   tiny,
                                   -tiny,
                                   tiny * 1.0000001,
                                   std::ldexp(1.0, -24),
                                   1e-30,
                                   1.0,
                                   65504.,
                                   65519.99,
                                   65520.0,
                                   -65520.,
                                   1e6,
                                   inf,
                                   -inf,
                                   nan,
                                   3e38};
    return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).to(on_device().dtype(dtype));
  }
};
AMPKIT_DEVICE_TEST_SUITE(TensorStats);

TEST_P(TensorStats, EqualsWhatACastToFloat16Does) {
  for (const auto dtype : {at::kDouble, at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor t = values(dtype);
    EXPECT_EQ(measured({t}), reference(t)) << c10::toString(dtype);
  }
  const at::Tensor f = values(at::kFloat);
  const std::vector<double> got = measured({f});
  EXPECT_EQ(got[1], 2);  // +-inf
  EXPECT_EQ(got[2], 1);
  EXPECT_EQ(got[3], 3);  // 2^-25 twice and 1e-30 flush to zero
  EXPECT_EQ(got[4], 4);  // 65520 twice, 1e6, 3e38 overflow
}

TEST_P(TensorStats, SeveralTensorsAddUpAndEmptyOnesAreSkipped) {
  const at::Tensor a = at::full({3}, 2.0, on_device());
  const at::Tensor b = at::full({2, 2}, -7e4, on_device());
  EXPECT_EQ(measured({a, at::empty({0}, on_device()), b}), (std::vector<double>{7e4, 0, 0, 0, 4}));
  EXPECT_FALSE(ampkit::tensor_stats({at::empty({0}, on_device())}).defined());
  EXPECT_FALSE(ampkit::tensor_stats({}).defined());
}

TEST_P(TensorStats, RecordsNoGraphAndChangesNothing) {
  const at::Tensor x = at::randn({4, 4}, on_device()).requires_grad_();
  const at::Tensor before = x.detach().clone();
  const at::Tensor stats = ampkit::tensor_stats({x * 2});
  EXPECT_FALSE(stats.requires_grad());
  EXPECT_TRUE(at::equal(x.detach(), before));
}

TEST(StatsSummary, AddsUpPerStepPassAndModuleInFirstSeenOrder) {
  ampkit::StatsSummary s;
  s.add(1, "forward", "0", "float32", 4, {2.0, 0, 0, 1, 0});
  s.add(0, "forward", "1", "float16", 8, {3.0, 0, 0, 0, 0});
  s.add(1, "backward", "0", "float32", 4, {inf, 2, 1, 0, 0});
  s.add(1, "forward", "0", "bfloat16", 4, {5.0, 0, 0, 1, 2});
  s.add(1, "backward", "1", "float32", 4, {1.0, 0, 1, 0, 0});
  const auto rows = s.rows();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].step, 0);  // by step first
  const ampkit::StatsRow& twice = rows[1];
  EXPECT_EQ(twice.module, "0");
  EXPECT_EQ(twice.dtype, "float32");  // the first measurement's
  EXPECT_EQ(twice.calls, 2);
  EXPECT_EQ(twice.numel, 8);
  EXPECT_EQ(twice.amax, 5.0);
  EXPECT_EQ(twice.underflow(), 2.0 / 8);
  EXPECT_EQ(twice.overflow(), 2.0 / 8);
  EXPECT_EQ(twice.headroom(), std::log2(65504.0 / 5.0));
  EXPECT_EQ(rows[2].pass, "backward");
  EXPECT_EQ(rows[2].headroom(), -inf);
  EXPECT_EQ(s.first_nonfinite(1, "backward"), "0");  // the first of two
  EXPECT_EQ(s.first_nonfinite(1, "forward"), std::nullopt);
  EXPECT_EQ(ampkit::float16_headroom(0.0), inf);
}

TEST(PolicyRegion, NestsPerThreadAndRefusesAPopTooMany) {
  EXPECT_EQ(ampkit::current_policy_dtype(), std::nullopt);
  {
    ampkit::PolicyRegionGuard outer(at::kFloat);
    ampkit::push_policy_region(at::kBFloat16);
    EXPECT_EQ(ampkit::current_policy_dtype(), at::kBFloat16);
    EXPECT_EQ(ampkit::policy_region_depth(), 2u);
    std::thread([] { EXPECT_EQ(ampkit::current_policy_dtype(), std::nullopt); }).join();
    ampkit::pop_policy_region();
    EXPECT_EQ(ampkit::current_policy_dtype(), at::kFloat);
  }
  EXPECT_EQ(ampkit::policy_region_depth(), 0u);
  EXPECT_THROW(ampkit::pop_policy_region(), ampkit::StateError);
  EXPECT_THROW(ampkit::push_policy_region(at::kDouble), ampkit::ArgumentError);
}

}  // namespace
