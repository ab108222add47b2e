// ampkit._C: declarations only. Every behaviour lives in core/; this file names it for Python.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>

#include "ampkit/autocast.h"
#include "ampkit/dispatch_context.h"
#include "ampkit/errors.h"
#include "ampkit/grad_scaler.h"
#include "ampkit/policy_region.h"
#include "ampkit/scaler_checkpoint.h"
#include "ampkit/tensor_stats.h"
#include "warnings_to_python.h"

namespace py = pybind11;
using namespace ampkit;

namespace {
// A core warning text, raised as a Python UserWarning (or as an error when warnings are errors).
// Stack level 1: the line that built ampkit.autocast (its construction has no Python frame).
void warn(const std::string& message) {
  if (!message.empty() && PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) {
    throw py::error_already_set();
  }
}

// {torch.device: found_inf}, as torch.amp's found_inf_per_device.
py::dict per_device(const PerDevice& found) {
  py::dict out;
  for (const auto& [device, tensor] : found) out[py::cast(device)] = tensor;
  return out;
}

std::optional<at::Tensor> if_defined(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  return tensor;
}

PyObject* is_compiling(PyObject*, PyObject*) {
  // The module's namespace and the interned key, looked up once and kept for the process.
  static PyObject* compiler = PyImport_ImportModule("torch.compiler");
  static PyObject* globals = compiler ? PyModule_GetDict(compiler) : nullptr;
  static PyObject* key = PyUnicode_InternFromString("_is_compiling_flag");
  if (globals == nullptr) return nullptr;
  PyObject* flag = PyDict_GetItemWithError(globals, key);  // borrowed
  if (flag == nullptr) return PyErr_Occurred() ? nullptr : Py_NewRef(Py_False);
  return Py_NewRef(flag);
}

// ---- ampkit.autocast's construction ----------------------------------------------------------
// The class's __new__ and __init__ are these two C functions (python/ampkit/autocast.py installs
// them), so that building a region costs no Python frame and no pybind11 dispatch:
//   ampkit.autocast(...)      __new__ builds the region; __init__ finds it built and returns.
//   a subclass's own __init__ __new__ returns an empty instance; the subclass's
//                             super().__init__(device_type, ...) builds the region.
// The argument conversion (and its TypeError) lives here alone: the rules of the values are the
// core's (autocast.h).

PyObject* g_argument_type_error = nullptr;     // ampkit._C.ArgumentTypeError
PyObject* g_device_type_type_error = nullptr;  // ampkit._C.DeviceTypeTypeError
PyObject* g_region_init = nullptr;             // the __init__ descriptor below

// type(value).__name__, as Python spells it in messages.
std::string type_name(PyObject* value) {
  PyObject* name = PyObject_GetAttrString(reinterpret_cast<PyObject*>(Py_TYPE(value)), "__name__");
  const char* text = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
  std::string out = text ? text : "?";
  Py_XDECREF(name);
  PyErr_Clear();  // a name that cannot be read is "?", not an error of its own
  return out;
}

// Sets the TypeError for the first argument of the wrong type; returns false when all are right.
bool argument_type_error(PyObject* device_type, PyObject* dtype, PyObject* enabled,
                         PyObject* cache_enabled) {
  if (!PyUnicode_Check(device_type)) {
    // torch.autocast raises ValueError with this text; ampkit's class is also a TypeError.
    PyObject* type_repr = PyObject_Str(reinterpret_cast<PyObject*>(Py_TYPE(device_type)));
    const std::string message =
        "Expected `device_type` of type `str`, got: `" +
        std::string(type_repr ? PyUnicode_AsUTF8(type_repr) : "?") +
        "`: " + must_be("device_type", "a str such as 'cpu' or 'cuda'", type_name(device_type));
    Py_XDECREF(type_repr);
    PyErr_SetString(g_device_type_type_error, message.c_str());
    return true;
  }
  const struct {
    const char* name;
    PyObject* value;
    bool ok;
    const char* rule;
  } checks[] = {
      {"dtype", dtype, dtype == Py_None || THPDtype_Check(dtype), "a torch.dtype or None"},
      {"enabled", enabled, PyBool_Check(enabled), "a bool"},
      {"cache_enabled", cache_enabled, cache_enabled == Py_None || PyBool_Check(cache_enabled),
       "a bool or None"},
  };
  for (const auto& check : checks) {
    if (!check.ok) {
      const std::string message = must_be(check.name, check.rule, type_name(check.value));
      PyErr_SetString(g_argument_type_error, message.c_str());
      return true;
    }
  }
  return false;
}

// A device_type for the query functions: a str, else their TypeError (from Python's call).
std::string device_type_of(py::handle device_type) {
  if (!PyUnicode_Check(device_type.ptr())) {
    throw ArgumentTypeError(
        must_be("device_type", "a str such as 'cpu' or 'cuda'", type_name(device_type.ptr())));
  }
  return device_type.cast<std::string>();
}

// The region for torch.autocast's arguments, its warning emitted; nullptr with an error set.
AutocastRegion* build_region(PyObject* device_type, PyObject* dtype, PyObject* enabled,
                             PyObject* cache_enabled) {
  if (argument_type_error(device_type, dtype, enabled, cache_enabled)) return nullptr;
  try {
    std::optional<at::ScalarType> scalar_type;
    if (dtype != Py_None) scalar_type = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
    std::optional<bool> cache;
    if (cache_enabled != Py_None) cache = cache_enabled == Py_True;
    const char* device = PyUnicode_AsUTF8(device_type);
    if (device == nullptr) return nullptr;  // not encodable (a lone surrogate): its error is set
    auto region = std::make_unique<AutocastRegion>(device, scalar_type, enabled == Py_True, cache);
    warn(region->warning());
    return region.release();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    py::detail::try_translate_exceptions();
  }
  return nullptr;
}

py::detail::value_and_holder region_holder(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  return inst->get_value_and_holder(py::detail::get_type_info(typeid(AutocastRegion)));
}

// Hands `region` to the instance as its value, the way pybind11's factory constructors do.
void adopt_region(PyObject* self, AutocastRegion* region) {
  auto v_h = region_holder(self);
  v_h.value_ptr() = region;
  v_h.type->init_instance(reinterpret_cast<py::detail::instance*>(self), nullptr);
}

// An instance of `type` (ampkit.autocast or a subclass) with no region yet, allocated by
// pybind11's own tp_new (the Python classes' __new__ is new_region itself).
PyObject* empty_instance(PyTypeObject* type) {
  static PyObject* empty = PyTuple_New(0);
  static PyTypeObject* base = py::detail::get_type_info(typeid(AutocastRegion))->type;
  try {  // pybind11's tp_new throws C++ exceptions, which must not cross into C
    return base->tp_new(type, empty, nullptr);
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
}

static const char* kRegionArgs[] = {"device_type", "dtype", "enabled", "cache_enabled", nullptr};

// __new__(cls, device_type, dtype=None, enabled=True, cache_enabled=None). While torch.compile
// traces it returns torch.autocast(...), which Dynamo understands.
PyObject* new_region(PyObject*, PyObject* args, PyObject* kwargs) {
  static PyObject* torch_autocast = nullptr;
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (n < 1 || !PyType_Check(PyTuple_GET_ITEM(args, 0))) {
    PyErr_SetString(PyExc_TypeError, "autocast.__new__(cls, ...): cls must be a type");
    return nullptr;
  }
  auto* type = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(args, 0));
  static PyTypeObject* base = py::detail::get_type_info(typeid(AutocastRegion))->type;
  if (!PyType_IsSubtype(type, base)) {
    PyErr_Format(PyExc_TypeError, "autocast.__new__(%s): %s is not a subtype of autocast",
                 type->tp_name, type->tp_name);
    return nullptr;
  }
  // A subclass with an __init__ of its own builds the region there (its super().__init__).
  static PyObject* init_key = PyUnicode_InternFromString("__init__");
  if (_PyType_Lookup(type, init_key) != g_region_init) return empty_instance(type);
  static const char* names[] = {"cls", "device_type", "dtype", "enabled", "cache_enabled", nullptr};
  PyObject *cls = nullptr, *device_type = nullptr;
  PyObject *dtype = Py_None, *enabled = Py_True, *cache_enabled = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OOO:autocast", const_cast<char**>(names), &cls,
                                   &device_type, &dtype, &enabled, &cache_enabled)) {
    return nullptr;
  }
  PyObject* flag = is_compiling(nullptr, nullptr);
  if (flag == nullptr) return nullptr;
  const bool compiling = flag == Py_True;
  Py_DECREF(flag);
  if (compiling) {
    if (torch_autocast == nullptr) {
      PyObject* mod = PyImport_ImportModule("torch.amp.autocast_mode");
      torch_autocast = mod ? PyObject_GetAttrString(mod, "autocast") : nullptr;
      Py_XDECREF(mod);
      if (torch_autocast == nullptr) return nullptr;
    }
    return PyObject_CallFunctionObjArgs(torch_autocast, device_type, dtype, enabled, cache_enabled,
                                        nullptr);
  }
  AutocastRegion* region = build_region(device_type, dtype, enabled, cache_enabled);
  if (region == nullptr) return nullptr;
  PyObject* self = empty_instance(type);
  if (self == nullptr) {
    delete region;
    return nullptr;
  }
  adopt_region(self, region);
  return self;
}

// __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None): nothing to do when
// __new__ built the region; else (a subclass's super().__init__) builds it.
PyObject* init_region(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (region_holder(self).holder_constructed()) Py_RETURN_NONE;
  PyObject* device_type = nullptr;
  PyObject *dtype = Py_None, *enabled = Py_True, *cache_enabled = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO:autocast", const_cast<char**>(kRegionArgs),
                                   &device_type, &dtype, &enabled, &cache_enabled)) {
    return nullptr;
  }
  AutocastRegion* region = build_region(device_type, dtype, enabled, cache_enabled);
  if (region == nullptr) return nullptr;
  adopt_region(self, region);
  Py_RETURN_NONE;
}

// The region an instance holds, or nullptr with a TypeError (an instance whose __init__ never ran).
AutocastRegion* held_region(PyObject* self) {
  auto v_h = region_holder(self);
  if (!v_h.holder_constructed()) {
    PyErr_SetString(PyExc_TypeError, "the autocast region was never initialised (__init__)");
    return nullptr;
  }
  return v_h.value_ptr<AutocastRegion>();
}

PyObject* region_enter(PyObject* self, PyObject*) {
  AutocastRegion* region = held_region(self);
  if (region == nullptr) return nullptr;
  try {
    region->enter();
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
  return Py_NewRef(self);
}

// Exits release the GIL, as torch's clear_autocast_cache does: leaving the outermost region
// clears the cast cache under its mutex, which another thread may hold while its cast re-enters
// Python (a dispatch mode, a tensor subclass) and waits for the GIL.
// With an exception on its way (__exit__'s first argument not None), the region unwinds: a region
// entered inside it and left open is closed too, and the exception is not replaced by a refusal.
PyObject* region_exit(PyObject* self, PyObject* args) {
  AutocastRegion* region = held_region(self);
  if (region == nullptr) return nullptr;
  const bool unwinding = PyTuple_GET_SIZE(args) > 0 && PyTuple_GET_ITEM(args, 0) != Py_None;
  try {
    py::gil_scoped_release no_gil;
    region->exit(unwinding);
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
  Py_RETURN_FALSE;
}

// The same as a type slot: ampkit.autocast's tp_init (install_region_init), so that building
// ampkit.autocast(...) calls it directly, with no lookup of __init__ and no method call.
int init_region_slot(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (region_holder(self).holder_constructed()) return 0;
  PyObject* done = init_region(self, args, kwargs);
  if (done == nullptr) return -1;
  Py_DECREF(done);
  return 0;
}

PyObject* install_region_init(PyObject*, PyObject* cls) {
  static PyTypeObject* base = py::detail::get_type_info(typeid(AutocastRegion))->type;
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), base)) {
    PyErr_SetString(PyExc_TypeError, "install_region_init: a subclass of AutocastRegion");
    return nullptr;
  }
  reinterpret_cast<PyTypeObject*>(cls)->tp_init = init_region_slot;
  PyType_Modified(reinterpret_cast<PyTypeObject*>(cls));
  Py_RETURN_NONE;
}

// ---- precision policy regions (policy_region.h) ----------------------------------------------
// Plain CPython functions: a policy's forward pushes and pops on every call, and the audit asks
// for the current region on every torch function call; pybind11's dispatch would cost more.

PyObject* push_policy_region_py(PyObject*, PyObject* dtype) {
  if (!THPDtype_Check(dtype)) {
    PyErr_SetString(g_argument_type_error, "push_policy_region: `dtype` must be a torch.dtype.");
    return nullptr;
  }
  try {
    push_policy_region(reinterpret_cast<THPDtype*>(dtype)->scalar_type);
  } catch (const ArgumentError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* g_state_error = nullptr;  // ampkit._C.StateError

PyObject* pop_policy_region_py(PyObject*, PyObject*) {
  try {
    pop_policy_region();
  } catch (const StateError& e) {
    PyErr_SetString(g_state_error, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* current_policy_dtype_py(PyObject*, PyObject*) {
  // The names, interned once: "float32", "bfloat16", "float16".
  static PyObject* float32 = PyUnicode_InternFromString("float32");
  static PyObject* bfloat16 = PyUnicode_InternFromString("bfloat16");
  static PyObject* float16 = PyUnicode_InternFromString("float16");
  const auto dtype = current_policy_dtype();
  if (!dtype) Py_RETURN_NONE;
  PyObject* name = *dtype == at::kFloat ? float32 : *dtype == at::kBFloat16 ? bfloat16 : float16;
  return Py_NewRef(name);
}

// One row of a StatsSummary as the locator's summary() gives it.
py::dict stats_row(const StatsRow& r) {
  py::dict d;
  d["step"] = r.step;
  d["module"] = r.module;
  d["pass"] = r.pass;
  d["dtype"] = r.dtype;
  d["calls"] = r.calls;
  d["numel"] = r.numel;
  d["amax"] = r.amax;
  d["inf"] = r.inf;
  d["nan"] = r.nan;
  d["underflow"] = r.underflow();
  d["overflow"] = r.overflow();
  d["headroom"] = r.headroom();
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "ampkit's C++ core: the autocast guard and the grad-scaler state machine.";

  // Each core error is also the built-in type torch.amp raises for the same misuse
  // (see core/include/ampkit/errors.h).
  py::register_exception<ArgumentError>(
      m, "ArgumentError",
      py::make_tuple(py::handle(PyExc_ValueError), py::handle(PyExc_AssertionError)))
      .attr("__doc__") =
      "An argument outside its rule; a ValueError (and an AssertionError, which "
      "torch.amp raises for bad factors).";
  py::register_exception<DeviceStringError>(
      m, "DeviceStringError",
      py::make_tuple(m.attr("ArgumentError"), py::handle(PyExc_RuntimeError)))
      .attr("__doc__") =
      "A string that names no device, or a device autocast does not run on: an "
      "ArgumentError (a ValueError) and a RuntimeError, the type torch raises for it.";
  auto missing_key_error = py::register_exception<MissingKeyError>(
      m, "MissingKeyError", py::make_tuple(m.attr("ArgumentError"), py::handle(PyExc_KeyError)));
  missing_key_error.attr("__doc__") =
      "A state dict without a key it must have: an ArgumentError (a ValueError) and a KeyError, "
      "the type torch.amp raises for it.";
  // The message as written (KeyError's own str() would show it quoted, as a key).
  missing_key_error.attr("__str__") = py::handle(PyExc_BaseException).attr("__str__");
  auto argument_type_error =
      py::register_exception<ArgumentTypeError>(m, "ArgumentTypeError", PyExc_TypeError);
  argument_type_error.attr("__doc__") = "An argument of the wrong type; a TypeError.";
  g_argument_type_error = argument_type_error.ptr();
  // torch.autocast raises ValueError for a device_type that is not a str; ampkit's error is that
  // and an ArgumentTypeError.
  g_device_type_type_error = PyErr_NewExceptionWithDoc(
      "ampkit._C.DeviceTypeTypeError",
      "A device_type that is not a str: an ArgumentTypeError (a TypeError) and the ValueError "
      "torch.autocast raises for it.",
      py::make_tuple(argument_type_error, py::handle(PyExc_ValueError)).ptr(), nullptr);
  m.add_object("DeviceTypeTypeError", py::handle(g_device_type_type_error));
  auto state_error = py::register_exception<StateError>(
      m, "StateError",
      py::make_tuple(py::handle(PyExc_RuntimeError), py::handle(PyExc_AssertionError)));
  state_error.attr("__doc__") =
      "A call out of order (unscale_ twice, step twice, update with no inf checks, "
      "...); a RuntimeError and an AssertionError, as torch.amp raises either.";
  g_state_error = state_error.ptr();

  // ---- autocast ----
  // Only what ampkit.autocast and the R package use: a request's warning (R warns before
  // entering a disabled region) and a token's `active` (R prints a context as open or exited).
  py::class_<AutocastRequest>(m, "AutocastRequest", "A resolved autocast request.")
      .def_readonly("warning", &AutocastRequest::warning);
  py::class_<AutocastToken>(m, "AutocastToken", "Proof that an autocast region was entered.")
      .def_property_readonly("active", &AutocastToken::active);
  // The class behind ampkit.autocast (python/ampkit/autocast.py subclasses it, installing
  // new_region and region_init as __new__ and __init__): construction, __enter__ and __exit__ go
  // straight to the core, no Python frame.
  py::class_<AutocastRegion> region_class(m, "AutocastRegion",
                                          "A resolved request, entered re-entrantly.");
  // __enter__ and __exit__ are plain CPython methods (region_enter, region_exit): pybind11's
  // dispatch would cost more than the core's work.
  static PyMethodDef enter_def = {"__enter__", &region_enter, METH_NOARGS,
                                  "__enter__($self, /)\n--\n\nEnter the region."};
  static PyMethodDef exit_def = {"__exit__", &region_exit, METH_VARARGS,
                                 "__exit__($self, /, *args)\n--\n\nLeave the region."};
  auto* region_type = reinterpret_cast<PyTypeObject*>(region_class.ptr());
  region_class.attr("__enter__") =
      py::reinterpret_steal<py::object>(PyDescr_NewMethod(region_type, &enter_def));
  region_class.attr("__exit__") =
      py::reinterpret_steal<py::object>(PyDescr_NewMethod(region_type, &exit_def));
  region_class.def_property_readonly("device", &AutocastRegion::device_type_name)
      .def_property_readonly("fast_dtype",
                             [](const AutocastRegion& self) { return self.request().dtype; })
      .def_property_readonly("enabled",
                             [](const AutocastRegion& self) { return self.request().enabled; })
      .def_property_readonly(
          "cache_enabled", [](const AutocastRegion& self) { return self.request().cache_enabled; })
      .def_property_readonly("request", &AutocastRegion::request);
  m.def("resolve_autocast", &resolve_autocast, py::arg("device_type"), py::arg("dtype"),
        py::arg("enabled").noconvert(), py::arg("cache_enabled").noconvert(),
        "Resolve a request as torch.autocast.__init__ does; the warning, if any, is returned.");
  m.def("enter_autocast", &enter_autocast, py::arg("request"),
        "Enter a region; returns its token.");
  m.def("exit_autocast", &exit_autocast, py::arg("token"), py::call_guard<py::gil_scoped_release>(),
        "Leave the region of `token` (without the GIL: see __exit__).");
  m.def("unwind_autocast", &unwind_autocast, py::arg("token"),
        py::call_guard<py::gil_scoped_release>(),
        "Leave the region of `token` while an exception propagates: regions left open inside it "
        "are closed with it.");
  m.def(
      "is_autocast_enabled",
      [](py::handle device_type) { return is_autocast_enabled(device_type_of(device_type)); },
      py::arg("device_type"));
  m.def(
      "get_autocast_dtype",
      [](py::handle device_type) { return get_autocast_dtype(device_type_of(device_type)); },
      py::arg("device_type"));
  // torch.compiler.is_compiling() without its Python frame, for ampkit.autocast's hot __new__:
  // the flag torch.compile holds True while it traces. A plain CPython function (pybind11's
  // dispatch would cost more than the frame it saves). Dynamo cannot trace a C function, so
  // python/ampkit/autocast.py registers torch.compiler.is_compiling as its substitute in graphs.
  static PyMethodDef is_compiling_def = {"is_compiling", &is_compiling, METH_NOARGS,
                                         "Whether torch.compile is tracing (its flag)."};
  m.add_object("is_compiling",
               py::reinterpret_steal<py::object>(PyCFunction_New(&is_compiling_def, nullptr)));
  static PyMethodDef new_region_def = {"new_region", reinterpret_cast<PyCFunction>(&new_region),
                                       METH_VARARGS | METH_KEYWORDS,
                                       "ampkit.autocast.__new__: a region, or torch.autocast "
                                       "while torch.compile traces."};
  m.add_object("new_region",
               py::reinterpret_steal<py::object>(PyCFunction_New(&new_region_def, nullptr)));
  static PyMethodDef region_init_def = {
      "__init__", reinterpret_cast<PyCFunction>(&init_region), METH_VARARGS | METH_KEYWORDS,
      "__init__($self, /, device_type, dtype=None, enabled=True, cache_enabled=None)\n--\n\n"
      "Builds the region unless __new__ did (a subclass's super().__init__ does)."};
  g_region_init =
      PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(region_class.ptr()), &region_init_def);
  m.add_object("region_init", py::handle(g_region_init));
  static PyMethodDef install_def = {
      "install_region_init", &install_region_init, METH_O,
      "Sets a region class's tp_init slot to region_init's C function (ampkit.autocast's own "
      "construction then calls no Python-level __init__)."};
  m.add_object("install_region_init",
               py::reinterpret_steal<py::object>(PyCFunction_New(&install_def, nullptr)));

  // ---- grad scaler ----
  py::register_exception<ScaleCollapseError>(m, "ScaleCollapseError", state_error).attr("__doc__") =
      "The loss scale collapsed: a back-off was due while the scale was already at min_scale "
      "(on_min_scale='raise'); a StateError, so a RuntimeError.";
  // The scaler's options and checkpoint keys come from the core's table (scaler_settings.h):
  // Python's and R's constructors build their keywords and defaults from SCALER_OPTIONS.
  m.attr("SCALER_OPTIONS") = py::cast(option_defaults());
  py::class_<OtherKind>(m, "OtherKind", "A value of a kind no option takes, by its type's name.")
      .def(py::init<std::string>(), py::arg("name"));
  // The checkpoint format is the core's (scaler_checkpoint.h): its keys, then each value's kind
  // and rule (load_state_dict).
  m.def(
      "unscale_grads",
      [](const ParamList& params, const at::Tensor& inv_scale, const at::Tensor& found_inf,
         bool allow_fp16) {
        return per_device(unscale_grads(params, inv_scale, allow_fp16, found_inf));
      },
      py::arg("params"), py::arg("inv_scale"), py::arg("found_inf"), py::arg("allow_fp16"),
      "torch.amp's _unscale_grads_: unscale and check, recording into found_inf's device.");
  m.attr("STATE_KEYS") = py::cast(state_keys());
  m.attr("TORCH_AMP_STATE_KEYS") = py::cast(torch_amp_state_keys());
  py::class_<ParamList>(m, "ParamList", "An optimizer's parameters, flattened over its groups.")
      .def(py::init<std::vector<at::Tensor>, std::vector<std::string>>(), py::arg("params"),
           py::arg("names"))
      .def("reset", &ParamList::reset, py::arg("params"), py::arg("names"));
  // Tensors shared with the R package in the same process, no copy: the address of a new
  // reference to the TensorImpl (the receiver takes it over), and taking one over. Addresses
  // travel as floats (exact below 2^53, as user-space addresses are): reticulate reads a large
  // Python int as a 32-bit R integer.
  m.def(
      "share_tensor",
      [](const at::Tensor& t) {
        return static_cast<double>(
            reinterpret_cast<uintptr_t>(at::Tensor(t).unsafeReleaseTensorImpl()));
      },
      py::arg("tensor"), "The address of a new reference to `tensor` (for R's adopt).");
  m.def(
      "adopt_tensor",
      [](double address) {
        return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim(
            reinterpret_cast<c10::TensorImpl*>(static_cast<uintptr_t>(address))));
      },
      py::arg("address"), "The tensor whose reference R shared at `address`.");
  m.def("param_names", &param_names, py::arg("given"), py::arg("sizes"), py::arg("optimizer"),
        "Names for an optimizer's parameters (param_list.h: the one rule).");
  py::class_<FusedStepArgs>(m, "FusedStepArgs")
      .def_readonly("grad_scale", &FusedStepArgs::grad_scale)
      .def_readonly("found_inf", &FusedStepArgs::found_inf);
  // The calls that run ATen ops issue their c10 warnings as Python warnings (warnings_to_python.h).
  const py::call_guard<ampkit_python::WarningsToPython> warns;
  // ---- precision policies and the overflow locator (policy_region.h, tensor_stats.h) ----
  static PyMethodDef push_policy_def = {
      "push_policy_region", &push_policy_region_py, METH_O,
      "push_policy_region(dtype, /)\n--\n\nOpen a precision policy region of `dtype` on this "
      "thread (float32, bfloat16 or float16)."};
  m.add_object("push_policy_region",
               py::reinterpret_steal<py::object>(PyCFunction_New(&push_policy_def, nullptr)));
  static PyMethodDef pop_policy_def = {
      "pop_policy_region", &pop_policy_region_py, METH_NOARGS,
      "pop_policy_region()\n--\n\nClose this thread's innermost precision policy region."};
  m.add_object("pop_policy_region",
               py::reinterpret_steal<py::object>(PyCFunction_New(&pop_policy_def, nullptr)));
  static PyMethodDef current_policy_def = {
      "current_policy_dtype", &current_policy_dtype_py, METH_NOARGS,
      "current_policy_dtype()\n--\n\nThe dtype name of this thread's innermost precision "
      "policy region (R's included), or None."};
  m.add_object("current_policy_dtype",
               py::reinterpret_steal<py::object>(PyCFunction_New(&current_policy_def, nullptr)));
  m.def(
      "autocast_devices_at_dispatch_entry",
      [](const std::vector<std::string>& device_types) {
        std::vector<c10::DeviceType> types;
        for (const auto& name : device_types) types.push_back(parse_device_type(name));
        const auto enabled = autocast_devices_at_dispatch_entry(types);
        std::vector<std::string> out;
        for (size_t i = 0; i < types.size(); ++i) {
          if (std::find(enabled.begin(), enabled.end(), types[i]) != enabled.end()) {
            out.push_back(device_types[i]);
          }
        }
        return out;
      },
      py::arg("device_types"),
      "Inside a dispatch mode: those of `device_types` that had autocast on when the operation "
      "was called (dispatch_context.h).");
  m.def(
      "tensor_stats",
      [](const std::vector<at::Tensor>& tensors) { return if_defined(tensor_stats(tensors)); },
      py::arg("tensors"), warns,
      "[amax, inf, nan, underflow, overflow] of the tensors on their device, or None "
      "(tensor_stats.h).");
  m.def("float16_headroom", &float16_headroom, py::arg("amax"), "log2(65504 / amax).");
  py::class_<StatsSummary>(m, "StatsSummary",
                           "The locator's measurements, added up per step, pass and module.")
      .def(py::init<>())
      .def("add", &StatsSummary::add, py::arg("step"), py::arg("pass_"), py::arg("module"),
           py::arg("dtype"), py::arg("numel"), py::arg("values"),
           "One tensor_stats() result read to the host.")
      .def(
          "rows",
          [](const StatsSummary& self) {
            py::list out;
            for (const StatsRow& r : self.rows()) out.append(stats_row(r));
            return out;
          },
          "The rows as dicts, by step, then in order of first measurement.")
      .def("first_nonfinite", &StatsSummary::first_nonfinite, py::arg("step"), py::arg("pass_"),
           "The first module of the step's pass whose values held inf or NaN, or None.");
  py::class_<GradScaler>(m, "GradScaler", "The grad-scaler state machine (see grad_scaler.h).")
      .def(py::init([](const std::string& device,
                       const std::map<std::string, SettingValue>& options, bool allow_fp16_grads) {
             return std::make_unique<GradScaler>(device, settings_from_options(options),
                                                 allow_fp16_grads);
           }),
           py::arg("device"), py::arg("options"), py::arg("allow_fp16_grads") = false,
           "Options by name (SCALER_OPTIONS), each judged by the core's table.")
      .def(
          "options",
          [](const GradScaler& self) {
            py::dict out;
            const ScalerState state{self.settings(), {}};
            for (const auto& e : scaler_table()) {
              if (e.option) out[py::str(e.name)] = py::cast(e.get(state));
            }
            return out;
          },
          "The options' current values, by name.")
      .def("is_enabled", &GradScaler::is_enabled)
      .def_property_readonly("device", &GradScaler::device)
      .def_property_readonly("warning", &GradScaler::warning)
      .def("scale", &GradScaler::scale, py::arg("outputs"), warns)
      .def("unscale_", &GradScaler::unscale_, py::arg("params"), warns)
      .def("may_step", &GradScaler::may_step, py::arg("params"), warns)
      .def("fused_step_args", &GradScaler::fused_step_args, py::arg("params"),
           py::arg("existing_grad_scale"), warns)
      .def("check_can_step", &GradScaler::check_can_step, py::arg("params"))
      .def("mark_stepped", &GradScaler::mark_stepped, py::arg("params"))
      .def("update", py::overload_cast<>(&GradScaler::update), warns,
           "Returns a warning to emit (on_min_scale='warn'), or ''.")
      .def("update_to", py::overload_cast<const at::Tensor&>(&GradScaler::update),
           py::arg("new_scale"), warns)
      .def("update_to", py::overload_cast<double>(&GradScaler::update), py::arg("new_scale"), warns)
      .def("step_was_skipped", &GradScaler::step_was_skipped, py::arg("params"), warns)
      .def(
          "stats",
          [](GradScaler& self) {
            const ScalerStats s = self.stats();
            py::dict out;
            out["steps"] = s.steps;
            out["skipped_steps"] = s.skipped_steps;
            out["consecutive_skipped_steps"] = s.consecutive_skipped_steps;
            out["scale"] = s.scale;
            return out;
          },
          warns)
      .def("overflow_report",
           [](const GradScaler& self) {
             py::list out;
             for (const auto& e : self.overflow_report()) {
               py::dict row;
               row["name"] = e.name;
               row["inf"] = e.inf;
               row["nan"] = e.nan;
               out.append(row);
             }
             return out;
           })
      .def("get_scale", &GradScaler::get_scale, warns)
      .def(
          "state_dict",
          [](GradScaler& self) {
            py::dict out;
            for (const auto& [key, value] : to_state_dict(self.state_dict())) {
              out[py::str(key)] = py::cast(value);
            }
            return out;
          },
          warns, "The state dict: torch.amp's keys, then ampkit's (scaler_checkpoint.h).")
      .def(
          "load_state_dict",
          [](GradScaler& self, const std::map<std::string, SettingValue>& values) {
            self.load_state_dict(from_state_dict(values, self.state_dict()));
          },
          py::arg("state"), warns, "Load a state dict; checked whole (keys, kinds, rules) first.")
      .def("get_growth_factor", &GradScaler::growth_factor)
      .def("get_backoff_factor", &GradScaler::backoff_factor)
      .def("get_growth_interval", &GradScaler::growth_interval)
      .def("set_growth_factor", &GradScaler::set_growth_factor, py::arg("new_factor"))
      .def("set_backoff_factor", &GradScaler::set_backoff_factor, py::arg("new_factor"))
      .def("set_growth_interval", &GradScaler::set_growth_interval, py::arg("new_interval"))
      .def_property_readonly("scale_tensor",
                             [](const GradScaler& self) { return if_defined(self.scale_tensor()); })
      .def_property_readonly(
          "growth_tracker_tensor",
          [](const GradScaler& self) { return if_defined(self.growth_tracker_tensor()); })
      .def_property_readonly("init_scale", &GradScaler::init_scale)
      .def_property("init_growth_tracker", &GradScaler::init_growth_tracker,
                    &GradScaler::set_init_growth_tracker)
      .def("init_on", &GradScaler::init_on, py::arg("device"), warns)
      .def(
          "check_inf",
          [](GradScaler& self, const ParamList& params) {
            return per_device(self.check_inf(params));
          },
          py::arg("params"), warns)
      .def(
          "found_inf_per_device",
          [](const GradScaler& self, const ParamList& params) {
            return per_device(self.found_inf_per_device(params));
          },
          py::arg("params"))
      .def(
          "stage",
          [](const GradScaler& self, const ParamList& params) -> std::optional<std::string> {
            const auto stage = self.stage(params);
            if (!stage) return std::nullopt;
            static const char* names[] = {"READY", "UNSCALED", "STEPPED"};
            return names[static_cast<int>(*stage)];
          },
          py::arg("params"), "The stage's name (torch.amp's OptState), or None.")
      .def("set_found_inf_agreement", &GradScaler::set_found_inf_agreement, py::arg("agree"),
           "A callable given each unscale's found_inf tensors, to agree on them in place.")
      .def("has_optimizer_states", &GradScaler::has_optimizer_states)
      .def_property_readonly("host_reads", &GradScaler::host_reads)
      .def("use_tensor_ops_for_policy", &GradScaler::use_tensor_ops_for_policy, py::arg("value"),
           "Tests only: a CPU scaler's policy update through the accelerator path.");
}
