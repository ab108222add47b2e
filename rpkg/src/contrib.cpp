// contrib_sort_vertices(): R torch's one contributed function, the vertex sort of rotated boxes'
// intersection polygons (Rotated_IoU, Lanxiao Li, MIT licence), written again here as a loop over
// the polygons on the CPU. R torch runs it as a CUDA kernel and nowhere else; this one runs on any
// device (CUDA tensors make one round trip through host memory), decides what the kernel leaves
// undefined (a point exactly on the x-axis, no invalid intersection point to pad with) and checks
// what the kernel trusts (`num_valid` past the 9 slots of a result, or past the valid points).
#include <ATen/ops/zeros.h>
#include <c10/util/StringUtil.h>

#include <cmath>
#include <string>

#include "ampkit_r.h"

namespace {

using namespace ampkit_r;

constexpr int64_t kSlots = 9;          // 8 vertices at most (two quadrilaterals), then the first
constexpr int64_t kIntersections = 8;  // points 0-7 are the boxes' corners, the rest intersections
constexpr double kEpsilon = 1e-8;

// Whether vertex 1 comes before vertex 2 around (0, 0): by angle from the positive x-axis,
// anticlockwise. Points within kEpsilon of each other are equal (neither comes first), so a
// repeated point is taken once. The kernel's arithmetic: float values, double comparisons. A point
// exactly on the x-axis, which the kernel leaves undefined, is in the upper half: its angle is 0
// or pi.
bool before(float x1, float y1, float x2, float y2) {
  if (std::fabs(x1 - x2) < kEpsilon && std::fabs(y2 - y1) < kEpsilon) return false;
  const bool upper1 = y1 >= 0;
  const bool upper2 = y2 >= 0;
  if (upper1 != upper2) return upper1;
  const float n1 = x1 * x1 + y1 * y1 + kEpsilon;
  const float n2 = x2 * x2 + y2 * y2 + kEpsilon;
  // x|x|/(x^2 + y^2) falls as the angle grows over [0, pi] and rises over (pi, 2 pi).
  const float key1 = std::fabs(x1) * x1 / n1;
  const float key2 = std::fabs(x2) * x2 / n2;
  return upper1 ? key1 - key2 > kEpsilon : key1 - key2 < kEpsilon;
}

struct Polygons {
  const float* vertices;     // [polygon][point][x, y]
  const bool* mask;          // [polygon][point]
  const int64_t* num_valid;  // [polygon], checked: 0 to 8
  int* idx;                  // [polygon][slot]
  int64_t points;
};

void sort_polygon(const Polygons& p, int64_t i) {
  const float* v = p.vertices + i * p.points * 2;
  const bool* mask = p.mask + i * p.points;
  int* idx = p.idx + i * kSlots;
  const int valid = static_cast<int>(p.num_valid[i]);
  // The padding is an invalid intersection point (the caller zeroes those), which adds no area to
  // the shoelace sum; where there is none, the first vertex again (a closed polygon's last
  // vertex, repeated, adds none either).
  int pad = -1;
  for (int64_t j = kIntersections; j < p.points && pad < 0; ++j) {
    if (!mask[j]) pad = static_cast<int>(j);
  }
  if (valid < 3) {  // no polygon: every slot the same point, an area of 0
    for (int64_t j = 0; j < kSlots; ++j) idx[j] = pad < 0 ? 0 : pad;
    return;
  }
  // Each vertex is the smallest valid point after the one before: selection, as the kernel does,
  // so that ties and repeated points fall the same way. The kernel starts from (1, -1e-8) as the
  // smallest so far, which hides a point within 1e-8 of it (on the x-axis): here none is hidden.
  for (int j = 0; j < valid; ++j) {
    int take = -1;
    for (int k = 0; k < p.points; ++k) {
      const float x = v[k * 2];
      const float y = v[k * 2 + 1];
      if (!mask[k]) continue;
      if (take >= 0 && !before(x, y, v[take * 2], v[take * 2 + 1])) continue;
      if (j > 0 && !before(v[idx[j - 1] * 2], v[idx[j - 1] * 2 + 1], x, y)) continue;
      take = k;
    }
    idx[j] = take < 0 ? 0 : take;  // none after the one before (repeated points): the kernel's 0
  }
  idx[valid] = idx[0];  // closed
  if (pad < 0) pad = idx[0];
  for (int64_t j = valid + 1; j < kSlots; ++j) idx[j] = pad;
  // Two identical boxes: each corner of one is a corner of the other, and the 8 vertices are the
  // 4 corners twice, which the shoelace sum would count twice. Keep one of each.
  if (valid == 8) {
    int repeated = 0;
    for (int64_t j = 0; j < 4; ++j) {
      for (int64_t k = 4; k < kIntersections; ++k) repeated += idx[k] == idx[j];
    }
    if (repeated == 4) {
      idx[4] = idx[0];
      for (int64_t j = 5; j < kSlots; ++j) idx[j] = pad;
    }
  }
}

std::string shape_text(const at::Tensor& t) { return "(" + c10::Join(", ", t.sizes()) + ")"; }

void check_input(const at::Tensor& t, const char* arg, bool dtype_ok, const char* dtype,
                 at::IntArrayRef shape, const char* rule) {
  if (!dtype_ok) {
    value_error(std::string("`") + arg + "` must be " + dtype + " tensor, got " +
                c10::toString(t.scalar_type()) + ".");
  }
  if (!t.sizes().equals(shape)) {
    value_error(std::string("`") + arg + "` must have shape " + rule + ", got " + shape_text(t) +
                ".");
  }
}

}  // namespace

extern "C" SEXP C_contrib_sort_vertices(SEXP vertices_, SEXP mask_, SEXP num_valid_) {
  AMPKIT_R_BEGIN
  const at::Tensor vertices_in = tensor_of(vertices_, "vertices");
  const at::Tensor mask_in = tensor_of(mask_, "mask");
  const at::Tensor num_valid_in = tensor_of(num_valid_, "num_valid");
  if (vertices_in.scalar_type() != at::kFloat) {
    value_error("`vertices` must be a float32 tensor, got " +
                std::string(c10::toString(vertices_in.scalar_type())) + ".");
  }
  if (vertices_in.dim() != 4 || vertices_in.size(3) != 2) {
    value_error("`vertices` must have shape (batch, polygons, points, 2), got " +
                shape_text(vertices_in) + ".");
  }
  const int64_t batch = vertices_in.size(0);
  const int64_t polygons = vertices_in.size(1);
  const int64_t points = vertices_in.size(2);
  check_input(mask_in, "mask", mask_in.scalar_type() == at::kBool, "a bool",
              {batch, polygons, points}, "(batch, polygons, points)");
  check_input(num_valid_in, "num_valid",
              at::isIntegralType(num_valid_in.scalar_type(), /*includeBool=*/false), "an integer",
              {batch, polygons}, "(batch, polygons)");
  for (const auto* other : {&mask_in, &num_valid_in}) {
    if (other->device() != vertices_in.device()) {
      value_error("`vertices`, `mask` and `num_valid` must be on one device, got " +
                  vertices_in.device().str() + ", " + mask_in.device().str() + " and " +
                  num_valid_in.device().str() + ".");
    }
  }
  const at::Tensor vertices = vertices_in.cpu().contiguous();
  const at::Tensor mask = mask_in.cpu().contiguous();
  const at::Tensor num_valid = num_valid_in.cpu().to(at::kLong).contiguous();
  const at::Tensor counts = mask.sum(-1);
  const int64_t* given = num_valid.data_ptr<int64_t>();
  const int64_t* count = counts.data_ptr<int64_t>();
  auto polygon = [&](int64_t i) {
    return "polygon [" + std::to_string(i / polygons + 1) + ", " +
           std::to_string(i % polygons + 1) + "]";
  };
  for (int64_t i = 0; i < batch * polygons; ++i) {
    if (given[i] < 0 || given[i] > kSlots - 1) {  // the kernel would write past the 9 slots
      value_error(
          "`num_valid` must be from 0 to 8 (a polygon where two boxes meet has at most 8 "
          "vertices), got " +
          std::to_string(given[i]) + " for " + polygon(i) + ".");
    }
    if (given[i] > count[i]) {
      value_error("`num_valid` must be at most the TRUE entries of `mask`, got " +
                  std::to_string(given[i]) + " for " + polygon(i) + ", which has " +
                  std::to_string(count[i]) + ".");
    }
  }
  at::Tensor idx = at::zeros({batch, polygons, kSlots}, at::kInt);
  const Polygons p{vertices.data_ptr<float>(), mask.data_ptr<bool>(), given, idx.data_ptr<int>(),
                   points};
  for (int64_t i = 0; i < batch * polygons; ++i) sort_polygon(p, i);
  return make_tensor(idx.to(vertices_in.device()));
  AMPKIT_R_END
}
