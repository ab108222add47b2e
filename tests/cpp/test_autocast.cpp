// The autocast guard against ATen's own thread-local state (the state torch.autocast drives).
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>

#include <thread>

#include "ampkit/autocast.h"
#include "ampkit/errors.h"

using ampkit::AutocastGuard;
using ampkit::resolve_autocast;

namespace {

// Every test starts from torch's defaults and checks it left them.
class Autocast : public ::testing::Test {
 protected:
  void SetUp() override { expect_defaults(); }
  void TearDown() override { expect_defaults(); }
  static void expect_defaults() {
    EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kBFloat16);
    EXPECT_TRUE(at::autocast::is_autocast_cache_enabled());
  }
};

TEST_F(Autocast, GuardSetsAndRestoresAllThree) {
  {
    AutocastGuard guard(resolve_autocast("cpu", at::kHalf, true, false));
    EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
    EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kHalf);
    EXPECT_FALSE(at::autocast::is_autocast_cache_enabled());
    auto a = at::randn({4, 4});
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kHalf);
  }
}

TEST_F(Autocast, UnsetDtypeAndCacheMeanCurrentValues) {
  AutocastGuard outer(resolve_autocast("cpu", at::kHalf, true, false));
  auto inner = resolve_autocast("cpu", std::nullopt, true, std::nullopt);
  EXPECT_EQ(inner.dtype, at::kHalf);
  EXPECT_FALSE(inner.cache_enabled);
}

TEST_F(Autocast, NestedDisabledAndOtherDtype) {
  auto a = at::randn({4, 4});
  AutocastGuard outer(resolve_autocast("cpu", at::kBFloat16, true, std::nullopt));
  {
    AutocastGuard off(resolve_autocast("cpu", std::nullopt, false, std::nullopt));
    EXPECT_EQ(at::mm(a, a).scalar_type(), at::kFloat);
    {
      AutocastGuard half(resolve_autocast("cpu", at::kHalf, true, std::nullopt));
      EXPECT_EQ(at::mm(a, a).scalar_type(), at::kHalf);
    }
    EXPECT_FALSE(at::autocast::is_autocast_enabled(at::kCPU));
  }
  EXPECT_TRUE(at::autocast::is_autocast_enabled(at::kCPU));
  EXPECT_EQ(at::mm(a, a).scalar_type(), at::kBFloat16);
}

TEST_F(Autocast, TokensExitInnermostFirstAndOnce) {
  auto outer = ampkit::enter_autocast(resolve_autocast("cpu", at::kHalf, true, std::nullopt));
  auto inner = ampkit::enter_autocast(resolve_autocast("cpu", at::kBFloat16, true, std::nullopt));
  EXPECT_EQ(inner.depth(), outer.depth() + 1);
  EXPECT_THROW(ampkit::exit_autocast(outer), ampkit::StateError);        // inner still open
  EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kBFloat16);  // nothing changed
  ampkit::exit_autocast(inner);
  EXPECT_EQ(at::autocast::get_autocast_dtype(at::kCPU), at::kHalf);
  EXPECT_THROW(ampkit::exit_autocast(inner), ampkit::StateError);  // already exited
  ampkit::exit_autocast(outer);
  EXPECT_FALSE(outer.active());
}

TEST_F(Autocast, CacheClearedWhenOutermostRegionCloses) {
  // A leaf float32 weight that requires grad is what autocast caches.
  auto w = at::randn({8, 8}).set_requires_grad(true);
  auto x = at::randn({8, 8});
  at::Tensor first, second, after_inner;
  {
    AutocastGuard outer(resolve_autocast("cpu", at::kBFloat16, true, true));
    first = at::mm(x, w);
    { AutocastGuard inner(resolve_autocast("cpu", at::kBFloat16, true, true)); }
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
    AutocastGuard again(resolve_autocast("cpu", at::kBFloat16, true, true));
    after_inner = at::mm(x, w);
  }
  EXPECT_FALSE(at::equal(first, after_inner));
}

TEST_F(Autocast, StateRestoredWhenBodyThrows) {
  try {
    AutocastGuard guard(resolve_autocast("cpu", at::kHalf, true, false));
    throw std::runtime_error("body failed");
  } catch (const std::runtime_error&) {
  }
}

TEST_F(Autocast, UnsupportedCpuDtypeWarnsAndDisables) {
  auto request = resolve_autocast("cpu", at::kDouble, true, std::nullopt);
  EXPECT_FALSE(request.enabled);
  EXPECT_NE(request.warning.find("Disabling autocast"), std::string::npos);
  EXPECT_EQ(request.dtype, at::kDouble);  // as torch.autocast, the dtype is still installed
}

TEST_F(Autocast, CudaWithoutCudaWarnsAndDisables) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present";
  auto request = resolve_autocast("cuda", std::nullopt, true, std::nullopt);
  EXPECT_FALSE(request.enabled);
  EXPECT_NE(request.warning.find("Disabling autocast"), std::string::npos);
}

TEST_F(Autocast, UnknownDeviceTypeIsAnError) {
  EXPECT_THROW(resolve_autocast("tpu9", std::nullopt, true, std::nullopt), ampkit::ArgumentError);
  // A device type autocast has no kernels for.
  EXPECT_THROW(resolve_autocast("meta", std::nullopt, true, std::nullopt), ampkit::ArgumentError);
}

TEST_F(Autocast, StateIsPerThread) {
  AutocastGuard guard(resolve_autocast("cpu", at::kHalf, true, std::nullopt));
  bool other_enabled = true;
  std::thread([&] { other_enabled = at::autocast::is_autocast_enabled(at::kCPU); }).join();
  EXPECT_FALSE(other_enabled);
}

TEST_F(Autocast, TokenFromAnotherThreadIsRejected) {
  auto token = ampkit::enter_autocast(resolve_autocast("cpu", at::kHalf, true, std::nullopt));
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
