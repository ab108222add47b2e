// The autocast guard against ATen's own thread-local state (the state torch.autocast drives), on
// each device type (device_test.h: cpu; cuda where there is CUDA).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <thread>

#include "ampkit/autocast.h"
#include "ampkit/errors.h"
#include "device_test.h"

using ampkit::AutocastGuard;
using ampkit::resolve_autocast;

namespace {

// Every test starts from torch's defaults on its device and checks it left them.
class Autocast : public ampkit_test::DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    if (!IsSkipped()) expect_defaults();
  }
  void TearDown() override {
    if (!IsSkipped()) expect_defaults();
  }
  void expect_defaults() const {
    EXPECT_FALSE(at::autocast::is_autocast_enabled(device_type()));
    EXPECT_EQ(at::autocast::get_autocast_dtype(device_type()), default_dtype());
    EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
  }
  at::Tensor randn(at::IntArrayRef size) const { return at::randn(size, on_device()); }
};
AMPKIT_DEVICE_TEST_SUITE(Autocast);

// What the device does no matter which device the suite runs on: plain tests.
class AutocastCpu : public ::testing::Test {};

TEST_P(Autocast, GuardSetsAndRestoresAllThree) {
  {
    AutocastGuard guard(resolve_autocast(device(), at::kHalf, true, false));
    EXPECT_TRUE(at::autocast::is_autocast_enabled(device_type()));
    EXPECT_EQ(at::autocast::get_autocast_dtype(device_type()), at::kHalf);
    EXPECT_FALSE(at::autocast::is_autocast_cache_enabled());
    auto a = randn({4, 4});
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kHalf);
  }
}

TEST_P(Autocast, UnsetDtypeAndCacheMeanCurrentValues) {
  AutocastGuard outer(resolve_autocast(device(), at::kHalf, true, false));
  auto inner = resolve_autocast(device(), std::nullopt, true, std::nullopt);
  EXPECT_EQ(inner.dtype, at::kHalf);
  EXPECT_FALSE(inner.cache_enabled);
}

TEST_P(Autocast, NestedDisabledAndOtherDtype) {
  auto a = randn({4, 4});
  AutocastGuard outer(resolve_autocast(device(), at::kBFloat16, true, std::nullopt));
  {
    AutocastGuard off(resolve_autocast(device(), std::nullopt, false, std::nullopt));
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
    {
      AutocastGuard half(resolve_autocast(device(), at::kHalf, true, std::nullopt));
      EXPECT_EQ(at::mm(a, a).scalar_type(), at::kHalf);
    }
    EXPECT_FALSE(at::autocast::is_autocast_enabled(device_type()));
  }
  EXPECT_TRUE(at::autocast::is_autocast_enabled(device_type()));
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kBFloat16);
}

TEST_P(Autocast, TokensExitInnermostFirstAndOnce) {
  auto outer = ampkit::enter_autocast(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  auto inner =
      ampkit::enter_autocast(resolve_autocast(device(), at::kBFloat16, true, std::nullopt));
  EXPECT_EQ(inner.depth(), outer.depth() + 1);
  EXPECT_THROW(ampkit::exit_autocast(outer), ampkit::StateError);             // inner still open
  EXPECT_EQ(at::autocast::get_autocast_dtype(device_type()), at::kBFloat16);  // nothing changed
  ampkit::exit_autocast(inner);
  EXPECT_EQ(at::autocast::get_autocast_dtype(device_type()), at::kHalf);
  EXPECT_THROW(ampkit::exit_autocast(inner), ampkit::StateError);  // already exited
  ampkit::exit_autocast(outer);
  EXPECT_FALSE(outer.active());
}

TEST_P(Autocast, UnwindClosesInnerRegionsLeftOpen) {
  // An error leaving the outer region while two inner ones (one of another dtype, one disabled)
  // are open: the state before the outer region comes back, and the nesting depth with it.
  const int depth_before = at::autocast::increment_nesting() - 1;
  at::autocast::decrement_nesting();
  auto outer = ampkit::enter_autocast(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  auto inner =
      ampkit::enter_autocast(resolve_autocast(device(), at::kBFloat16, true, std::nullopt));
  auto innermost = ampkit::enter_autocast(resolve_autocast(device(), std::nullopt, false, false));
  ampkit::unwind_autocast(outer);
  EXPECT_FALSE(outer.active());
  EXPECT_FALSE(inner.active());
  EXPECT_FALSE(innermost.active());
  EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
  EXPECT_EQ(at::autocast::increment_nesting() - 1, depth_before);
  at::autocast::decrement_nesting();
  // The inner tokens can close nothing now, also once a new region reaches their depth.
  auto again = ampkit::enter_autocast(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  auto again_inner =
      ampkit::enter_autocast(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  EXPECT_THROW(ampkit::exit_autocast(inner), ampkit::StateError);
  EXPECT_THROW(ampkit::unwind_autocast(innermost), ampkit::StateError);
  EXPECT_TRUE(again_inner.active());
  ampkit::exit_autocast(again_inner);
  ampkit::exit_autocast(again);
  EXPECT_THROW(ampkit::unwind_autocast(outer), ampkit::StateError);  // already exited
}

TEST_P(Autocast, UnwindOfTheInnermostRegionIsAnExit) {
  auto outer =
      ampkit::enter_autocast(resolve_autocast(device(), at::kBFloat16, true, std::nullopt));
  auto inner = ampkit::enter_autocast(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  ampkit::unwind_autocast(inner);
  EXPECT_TRUE(outer.active());
  EXPECT_EQ(at::autocast::get_autocast_dtype(device_type()), at::kBFloat16);
  ampkit::exit_autocast(outer);
}

TEST_P(Autocast, RegionExitWhileUnwindingClosesWhatItEntered) {
  ampkit::AutocastRegion region(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  ampkit::AutocastRegion inner(resolve_autocast(device(), at::kBFloat16, true, std::nullopt));
  region.enter();
  inner.enter();
  EXPECT_THROW(region.exit(), ampkit::StateError);  // not unwinding: refused, nothing changed
  EXPECT_EQ(at::autocast::get_autocast_dtype(device_type()), at::kBFloat16);
  region.exit(/*unwinding=*/true);
  EXPECT_EQ(region.open_count(), 0u);
  // The inner region's token was closed with it: its exit says so and drops the token.
  EXPECT_THROW(inner.exit(), ampkit::StateError);
  EXPECT_EQ(inner.open_count(), 0u);
}

TEST_P(Autocast, CacheClearedWhenOutermostRegionCloses) {
  // A leaf float32 weight that requires grad is what autocast caches.
  auto w = randn({8, 8}).set_requires_grad(true);
  auto x = randn({8, 8});
  at::Tensor first, second, after_inner;
  {
    AutocastGuard outer(resolve_autocast(device(), at::kBFloat16, true, true));
    first = at::mm(x, w);
    { AutocastGuard inner(resolve_autocast(device(), at::kBFloat16, true, true)); }
    // The inner region closing at depth 1 must not clear the cache: the cast weight is reused.
    second = at::mm(x, w);
    EXPECT_TRUE(at::equal(first, second));
  }
  // Weight changed in place: a fresh region must cast it again (the cache was cleared).
  {
    at::NoGradGuard no_grad;
    w.mul_(2);
  }
  {
    AutocastGuard again(resolve_autocast(device(), at::kBFloat16, true, true));
    after_inner = at::mm(x, w);
  }
  EXPECT_FALSE(at::equal(first, after_inner));
}

TEST_P(Autocast, StateRestoredWhenBodyThrows) {
  try {
    AutocastGuard guard(resolve_autocast(device(), at::kHalf, true, false));
    throw std::runtime_error("body failed");
  } catch (const std::runtime_error&) {
  }
}

// torch.autocast's rule: on the CPU a dtype other than bfloat16/float16 warns and disables the
// region; CUDA takes any dtype (torch.autocast checks none there but bfloat16's support).
TEST_P(Autocast, UnsupportedDtypeWarnsAndDisablesOnTheCpuOnly) {
  auto request = resolve_autocast(device(), at::kDouble, true, std::nullopt);
  const bool cpu = device_type() == c10::DeviceType::CPU;
  EXPECT_EQ(request.enabled, !cpu);
  EXPECT_EQ(request.warning.find("Disabling autocast") != std::string::npos, cpu);
  EXPECT_EQ(request.dtype, at::kDouble);  // as torch.autocast, the dtype is still installed
}

// CPU-only by nature: what "cuda" does where there is no CUDA.
TEST_F(AutocastCpu, CudaWithoutCudaWarnsAndDisables) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present";
  auto request = resolve_autocast("cuda", std::nullopt, true, std::nullopt);
  EXPECT_FALSE(request.enabled);
  EXPECT_NE(request.warning.find("Disabling autocast"), std::string::npos);
}

// No device: the parser's errors.
TEST_F(AutocastCpu, UnknownDeviceTypeIsAnError) {
  EXPECT_THROW(resolve_autocast("tpu9", std::nullopt, true, std::nullopt), ampkit::ArgumentError);
  // A device type autocast has no kernels for.
  EXPECT_THROW(resolve_autocast("meta", std::nullopt, true, std::nullopt), ampkit::ArgumentError);
}

TEST_P(Autocast, StateIsPerThread) {
  AutocastGuard guard(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  bool other_enabled = true;
  auto type = device_type();
  std::thread([&] { other_enabled = at::autocast::is_autocast_enabled(type); }).join();
  EXPECT_FALSE(other_enabled);
}

TEST_P(Autocast, TokenFromAnotherThreadIsRejected) {
  auto token = ampkit::enter_autocast(resolve_autocast(device(), at::kHalf, true, std::nullopt));
  bool rejected = false;
  std::thread([&] {
    try {
      ampkit::exit_autocast(token);
    } catch (const ampkit::StateError&) {
      rejected = true;
    }
  }).join();
  EXPECT_TRUE(rejected);
  EXPECT_TRUE(token.active());
  ampkit::exit_autocast(token);
}

}  // namespace
