// torch_save()/torch_load(): R values in PyTorch's own file format, the zip archive Python's
// torch.save writes (data.pkl, a pickle, and one record per storage under data/).
//
// Writing: libtorch's pickler with untagged containers (tag_aggregates = false), so the pickle
// holds only what Python's weights-only unpickler (torch.load's default) accepts: dicts, lists,
// numbers, strings, None and tensors (torch._utils._rebuild_tensor_v2 over typed storages). R's
// side: a tensor is a tensor, a named list a dict with string keys (in a partly named list an
// unnamed element's key is its 1-based position, an int), an unnamed list a list, a number a
// float, an integer an int, a flag a bool, a string a str, NULL None.
//
// Reading: a pickle reader of our own for that same subset, because libtorch's unpickler turns
// collections.OrderedDict (what Python's state_dict() is) into None. What it reads: PyTorch's
// weights-only globals (OrderedDict, the tensor and parameter rebuilders, typed storages) and
// libtorch's container tags (older files); anything else is refused by name.
#include <ATen/ops/empty.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ampkit_r.h"

namespace ampkit_r {
namespace {

// ---- R -> IValue (saving)
// ------------------------------------------------------------------------

bool has_names(SEXP names) {
  if (Rf_isNull(names)) return false;
  for (R_xlen_t i = 0; i < XLENGTH(names); ++i) {
    SEXP name = STRING_ELT(names, i);
    if (name != NA_STRING && CHAR(name)[0] != '\0') return true;
  }
  return false;
}

c10::IValue ivalue_of(SEXP x, const std::string& where) {
  if (Rf_isNull(x)) return c10::IValue();
  if (is_tensor(x)) return tensor_of(x, where.c_str());
  if (TYPEOF(x) == VECSXP) {
    SEXP names = Rf_getAttrib(x, R_NamesSymbol);
    if (has_names(names)) {
      c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
      for (R_xlen_t i = 0; i < XLENGTH(x); ++i) {
        SEXP name = STRING_ELT(names, i);
        const bool named = name != NA_STRING && CHAR(name)[0] != '\0';
        const std::string key = named ? Rf_translateCharUTF8(name) : std::string();
        const std::string at =
            named ? where + "$" + key : where + "[[" + std::to_string(i + 1) + "]]";
        c10::IValue value = ivalue_of(VECTOR_ELT(x, i), at);
        if (named) {
          if (dict.contains(key))
            value_error("`" + where + "` has two elements named \"" + key + "\".");
          dict.insert(key, std::move(value));
        } else {
          dict.insert(static_cast<int64_t>(i + 1), std::move(value));
        }
      }
      return dict;
    }
    c10::impl::GenericList list(c10::AnyType::get());
    for (R_xlen_t i = 0; i < XLENGTH(x); ++i) {
      list.push_back(ivalue_of(VECTOR_ELT(x, i), where + "[[" + std::to_string(i + 1) + "]]"));
    }
    return list;
  }
  if (Rf_xlength(x) == 1 && Rf_isNull(Rf_getAttrib(x, R_DimSymbol))) {
    switch (TYPEOF(x)) {
      case REALSXP:
        return REAL(x)[0];
      case INTSXP:
        return static_cast<int64_t>(INTEGER(x)[0]);
      case LGLSXP:
        return static_cast<bool>(LOGICAL(x)[0]);
      case STRSXP:
        return std::string(Rf_translateCharUTF8(STRING_ELT(x, 0)));
      default:
        break;
    }
  }
  if (TYPEOF(x) == REALSXP || TYPEOF(x) == INTSXP || TYPEOF(x) == LGLSXP) {
    // A vector of numbers: a list of them (PyTorch's optimizer options such as betas).
    c10::impl::GenericList list(c10::AnyType::get());
    for (R_xlen_t i = 0; i < XLENGTH(x); ++i) {
      if (TYPEOF(x) == REALSXP) list.push_back(REAL(x)[i]);
      if (TYPEOF(x) == INTSXP) list.push_back(static_cast<int64_t>(INTEGER(x)[i]));
      if (TYPEOF(x) == LGLSXP) list.push_back(static_cast<bool>(LOGICAL(x)[i]));
    }
    return list;
  }
  value_error("`" + where + "` cannot be saved: it is " + describe(x) +
              " (tensors, lists, numbers, flags, strings and NULL can).");
}

// PyTorch's rule, and its words: one storage is written once, typed by the first tensor that
// views it, so a view of it as another dtype (x$view(torch_int32()), torch_view_as_real(z))
// would come back as that first dtype's values.
void check_storage_types(const c10::IValue& v,
                         std::unordered_map<const void*, c10::ScalarType>& seen) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined() || !t.has_storage()) return;
    const auto [it, fresh] = seen.emplace(t.storage().unsafeGetStorageImpl(), t.scalar_type());
    if (!fresh && it->second != t.scalar_type()) {
      value_error(
          "Cannot save multiple tensors or storages that view the same data as different types "
          "(" +
          std::string(c10::toString(it->second)) + " and " + c10::toString(t.scalar_type()) +
          "): save a $clone() of one of them.");
    }
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) check_storage_types(e, seen);
  } else if (v.isTuple()) {
    for (const c10::IValue& e : v.toTupleRef().elements()) check_storage_types(e, seen);
  } else if (v.isGenericDict()) {
    for (const auto& entry : v.toGenericDict()) check_storage_types(entry.value(), seen);
  }
}

std::vector<char> save_archive(const c10::IValue& value) {
  std::unordered_map<const void*, c10::ScalarType> storage_types;
  check_storage_types(value, storage_types);
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> archive;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) {
    const char* p = static_cast<const char*>(bytes);
    archive.insert(archive.end(), p, p + n);
    return n;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                     writer);
  writer.writeEndOfFile();
  return archive;
}

// ---- the archive (loading) ---------------------------------------------------------------------

// The bytes of an R raw vector, read in place.
class RawReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  RawReader(const char* data, size_t size) : data_(data), size_(size) {}
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = std::min<size_t>(n, size_ - static_cast<size_t>(pos));
    std::memcpy(buf, data_ + pos, n);
    return n;
  }

 private:
  const char* data_;
  size_t size_;
};

// A global (a class or function the pickle names) on the reader's stack: a string with a prefix
// that no pickled string starts with, so it can sit inside tuples as PyTorch's storage types do.
const std::string kGlobal = "\x01global:";
bool is_global(const c10::IValue& v, const char* name = nullptr) {
  if (!v.isString()) return false;
  const std::string& s = v.toStringRef();
  if (s.compare(0, kGlobal.size(), kGlobal) != 0) return false;
  return name == nullptr || s.compare(kGlobal.size(), std::string::npos, name) == 0;
}
std::string global_name(const c10::IValue& v) { return v.toStringRef().substr(kGlobal.size()); }

// The pickle opcodes PyTorch's files use (pickle protocols 2 to 5).
enum Op : uint8_t {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  BINFLOAT = 'G',
  BININT = 'J',
  BININT1 = 'K',
  BININT2 = 'M',
  NONE = 'N',
  BINPERSID = 'Q',
  REDUCE = 'R',
  BINUNICODE = 'X',
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  APPENDS = 'e',
  BINGET = 'h',
  LONG_BINGET = 'j',
  LIST = 'l',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  SETITEMS = 'u',
  EMPTY_DICT = '}',
  EMPTY_LIST = ']',
  EMPTY_TUPLE = ')',
  PROTO = 0x80,
  NEWOBJ = 0x81,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95
};

class PickleReader {
 public:
  PickleReader(std::string pickle, caffe2::serialize::PyTorchStreamReader& archive)
      : data_(std::move(pickle)), archive_(archive) {}

  c10::IValue read() {
    while (true) {
      const uint8_t op = byte();
      if (op == STOP) break;
      step(op);
    }
    if (stack_.size() != 1) bad("it ends with " + std::to_string(stack_.size()) + " values");
    return stack_[0];
  }

 private:
  [[noreturn]] void bad(const std::string& why) {
    value_error("The file is not a pickle torch_load() can read: " + why + ".");
  }
  uint8_t byte() {
    if (pos_ >= data_.size()) bad("it is cut short");
    return static_cast<uint8_t>(data_[pos_++]);
  }
  std::string bytes(size_t n) {
    if (n > data_.size() - pos_) bad("it is cut short");
    std::string out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t little(size_t n) {  // an unsigned little-endian number of n bytes
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(byte()) << (8 * i);
    return v;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) bad("a name has no end");
    std::string out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  c10::IValue pop() {
    if (stack_.empty()) bad("its stack runs empty");
    c10::IValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::vector<c10::IValue> pop_to_mark() {
    if (marks_.empty()) bad("a mark is missing");
    const size_t start = marks_.back();
    marks_.pop_back();
    if (start > stack_.size()) bad("a mark is misplaced");
    std::vector<c10::IValue> items(std::make_move_iterator(stack_.begin() + start),
                                   std::make_move_iterator(stack_.end()));
    stack_.resize(start);
    return items;
  }
  c10::IValue& top() {
    if (stack_.empty()) bad("its stack runs empty");
    return stack_.back();
  }
  void memo_put(uint64_t id) { memo_[id] = top(); }
  void memo_get(uint64_t id) {
    auto it = memo_.find(id);
    if (it == memo_.end()) bad("it refers to a value it never stored");
    stack_.push_back(it->second);
  }
  static c10::IValue tuple(std::vector<c10::IValue> items) {
    return c10::ivalue::Tuple::create(std::move(items));
  }

  void step(uint8_t op) {
    switch (op) {
      case PROTO:
        byte();
        break;
      case FRAME:
        little(8);
        break;
      case MARK:
        marks_.push_back(stack_.size());
        break;
      case POP:
        pop();
        break;
      case POP_MARK:
        pop_to_mark();
        break;
      case NONE:
        stack_.emplace_back();
        break;
      case NEWTRUE:
        stack_.emplace_back(true);
        break;
      case NEWFALSE:
        stack_.emplace_back(false);
        break;
      case BININT:
        stack_.emplace_back(static_cast<int64_t>(static_cast<int32_t>(little(4))));
        break;
      case BININT1:
        stack_.emplace_back(static_cast<int64_t>(little(1)));
        break;
      case BININT2:
        stack_.emplace_back(static_cast<int64_t>(little(2)));
        break;
      case LONG1: {
        const size_t n = byte();
        if (n > 8) bad("an integer is wider than 64 bits");
        uint64_t v = little(n);
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);  // negative
        stack_.emplace_back(static_cast<int64_t>(v));
        break;
      }
      case BINFLOAT: {
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();  // big-endian
        double d;
        std::memcpy(&d, &bits, sizeof d);
        stack_.emplace_back(d);
        break;
      }
      // Strings and byte strings read the same: a length, then its bytes.
      case SHORT_BINUNICODE:
      case SHORT_BINBYTES:
        stack_.emplace_back(bytes(byte()));
        break;
      case BINUNICODE:
      case BINBYTES:
        stack_.emplace_back(bytes(little(4)));
        break;
      case BINUNICODE8:
        stack_.emplace_back(bytes(little(8)));
        break;
      case EMPTY_TUPLE:
        stack_.push_back(tuple({}));
        break;
      case TUPLE:
        stack_.push_back(tuple(pop_to_mark()));
        break;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        std::vector<c10::IValue> items(op - TUPLE1 + 1);
        for (size_t i = items.size(); i-- > 0;) items[i] = pop();
        stack_.push_back(tuple(std::move(items)));
        break;
      }
      case EMPTY_LIST:
        stack_.emplace_back(c10::impl::GenericList(c10::AnyType::get()));
        break;
      case LIST: {
        c10::impl::GenericList list(c10::AnyType::get());
        for (auto& v : pop_to_mark()) list.push_back(std::move(v));
        stack_.emplace_back(std::move(list));
        break;
      }
      case APPEND: {
        c10::IValue v = pop();
        if (!top().isList()) bad("it appends to what is no list");
        top().toList().push_back(std::move(v));
        break;
      }
      case APPENDS: {
        std::vector<c10::IValue> items = pop_to_mark();
        if (!top().isList()) bad("it appends to what is no list");
        auto list = top().toList();
        for (auto& v : items) list.push_back(std::move(v));
        break;
      }
      case EMPTY_DICT:
        stack_.emplace_back(empty_dict());
        break;
      case DICT: {
        std::vector<c10::IValue> items = pop_to_mark();
        c10::IValue dict = empty_dict();
        set_items(dict, items);
        stack_.push_back(std::move(dict));
        break;
      }
      case SETITEM: {
        c10::IValue value = pop();
        c10::IValue key = pop();
        set_items(top(), {std::move(key), std::move(value)});
        break;
      }
      case SETITEMS: {
        std::vector<c10::IValue> items = pop_to_mark();
        set_items(top(), items);
        break;
      }
      case BINPUT:
        memo_put(byte());
        break;
      case LONG_BINPUT:
        memo_put(little(4));
        break;
      case MEMOIZE:
        memo_put(memo_.size());
        break;
      case BINGET:
        memo_get(byte());
        break;
      case LONG_BINGET:
        memo_get(little(4));
        break;
      case GLOBAL: {
        std::string module = line();
        std::string name = line();
        stack_.emplace_back(kGlobal + module + "." + name);
        break;
      }
      case STACK_GLOBAL: {
        c10::IValue name = pop();
        c10::IValue module = pop();
        if (!name.isString() || !module.isString()) bad("a global's name is not a string");
        stack_.emplace_back(kGlobal + module.toStringRef() + "." + name.toStringRef());
        break;
      }
      case REDUCE:
      case NEWOBJ: {
        c10::IValue args = pop();
        c10::IValue callable = pop();
        stack_.push_back(call(callable, args));
        break;
      }
      case BUILD:
        // The object's state: an OrderedDict's attributes (a state dict's _metadata), a
        // parameter's Python attributes. R has no place for them.
        pop();
        break;
      case BINPERSID:
        stack_.push_back(storage(pop()));
        break;
      default:
        bad("it has the pickle opcode " + std::to_string(op) +
            ", which PyTorch's tensors, dicts, " + "lists, numbers and strings do not use");
    }
  }

  static c10::IValue empty_dict() {
    return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
  }
  void set_items(c10::IValue& target, const std::vector<c10::IValue>& items) {
    if (!target.isGenericDict()) bad("it sets items of what is no dict");
    auto dict = target.toGenericDict();
    for (size_t i = 0; i + 1 < items.size(); i += 2) dict.insert_or_assign(items[i], items[i + 1]);
  }

  // A global called with `args` (a tuple).
  c10::IValue call(const c10::IValue& callable, const c10::IValue& args) {
    if (!is_global(callable)) bad("it calls what is no class or function");
    const std::string name = global_name(callable);
    const std::vector<c10::IValue> a =
        args.isTuple() ? args.toTupleRef().elements().vec() : std::vector<c10::IValue>{};
    if (name == "collections.OrderedDict" || name == "builtins.dict") {
      c10::IValue dict = empty_dict();
      if (!a.empty() && a[0].isList()) {
        for (const auto& pair : a[0].toListRef()) {
          if (pair.isTuple() && pair.toTupleRef().elements().size() == 2) {
            set_items(dict, pair.toTupleRef().elements().vec());
          }
        }
      }
      return dict;
    }
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      if (a.size() < 4 || !a[0].isTensor()) bad("a tensor is rebuilt from the wrong values");
      at::Tensor flat = a[0].toTensor();
      at::Tensor t =
          at::empty({0}, flat.options()).set_(flat.storage(), a[1].toInt(), ints(a[2]), ints(a[3]));
      if (a.size() > 4 && a[4].isBool() && a[4].toBool()) t.requires_grad_(true);
      return t;
    }
    if (name == "torch._utils._rebuild_parameter" ||
        name == "torch._utils._rebuild_parameter_with_state") {
      if (a.size() < 2 || !a[0].isTensor()) bad("a parameter is rebuilt from the wrong values");
      at::Tensor t = a[0].toTensor();
      t.requires_grad_(a[1].isBool() && a[1].toBool());
      return t;
    }
    if (name == "torch._tensor._rebuild_from_type_v2") {
      // A tensor of a Python subclass (or with Python attributes): its plain tensor.
      if (a.size() < 3) bad("a tensor is rebuilt from the wrong values");
      return call(a[0], a[2]);
    }
    if (name == "torch.jit._pickle.restore_type_tag" || name == "torch.jit._pickle.build_intlist" ||
        name == "torch.jit._pickle.build_doublelist" ||
        name == "torch.jit._pickle.build_boollist" ||
        name == "torch.jit._pickle.build_tensorlist") {
      // libtorch's container tags (files of earlier versions): the container itself.
      if (a.empty()) bad("a container tag has no container");
      return a[0];
    }
    if (name == "torch.device") {
      if (a.empty() || !a[0].isString()) bad("a device has no name");
      return a[0];
    }
    value_error("The file holds a Python object (`" + name +
                "`) that R has no value for: torch_load() reads tensors and dicts, lists, " +
                "numbers and strings of them (what torch.load(weights_only = TRUE) reads).");
  }

  static std::vector<int64_t> ints(const c10::IValue& v) {
    std::vector<int64_t> out;
    if (v.isTuple()) {
      for (const auto& e : v.toTupleRef().elements()) out.push_back(e.toInt());
    } else if (v.isList()) {
      for (const auto& e : v.toListRef()) out.push_back(e.toInt());
    }
    return out;
  }

  // The storage a persistent id names ("storage", its type, key, location, numel), as a 1-d tensor
  // of its dtype; one per key, so the tensors that share a storage in the file share it here.
  c10::IValue storage(const c10::IValue& pid) {
    if (!pid.isTuple() || pid.toTupleRef().elements().size() < 5) bad("a storage has no id");
    const auto& e = pid.toTupleRef().elements();
    if (!e[0].isString() || e[0].toStringRef() != "storage" || !e[2].isString() ||
        !e[3].isString()) {
      bad("a storage id is not PyTorch's");
    }
    const std::string key = e[2].toStringRef();
    auto found = storages_.find(key);
    if (found != storages_.end()) return found->second;
    const c10::ScalarType type = storage_type(e[1]);
    at::Tensor flat = at::empty({0}, at::TensorOptions().dtype(type));
    const std::string record = "data/" + key;
    if (archive_.hasRecord(record)) {
      auto [data, nbytes] = archive_.getRecord(record);
      const int64_t itemsize = static_cast<int64_t>(c10::elementSize(type));
      c10::Storage s(c10::Storage::use_byte_size_t(), static_cast<int64_t>(nbytes), std::move(data),
                     /*allocator=*/nullptr, /*resizable=*/false);
      flat.set_(s, 0, {static_cast<int64_t>(nbytes) / itemsize}, {1});
    } else if (!e[4].isInt() || e[4].toInt() != 0) {
      bad("the storage " + key + " is missing");
    }
    const c10::Device device(e[3].toStringRef());
    if (device.is_cuda() && at::globalContext().hasCUDA()) flat = flat.to(device);
    storages_.emplace(key, flat);
    return flat;
  }

  c10::ScalarType storage_type(const c10::IValue& v) {
    if (!is_global(v)) bad("a storage has no type");
    std::string name = global_name(v);
    if (name.compare(0, 6, "torch.") != 0) bad("a storage's type is not PyTorch's");
    name = name.substr(6);
    if (name == "UntypedStorage") return at::kByte;
    for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
      const auto t = static_cast<c10::ScalarType>(i);
      if (name == std::string(c10::toString(t)) + "Storage") return t;
    }
    value_error("The file holds a storage of type `torch." + name + "`, which R cannot read.");
  }

  std::string data_;
  size_t pos_ = 0;
  caffe2::serialize::PyTorchStreamReader& archive_;
  std::vector<c10::IValue> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, c10::IValue> memo_;
  std::map<std::string, at::Tensor> storages_;
};

// ---- IValue -> R
// ---------------------------------------------------------------------------------

SEXP r_of(const c10::IValue& v);

SEXP r_of_dict(const c10::impl::GenericDict& dict) {
  // Integer keys among string keys are the unnamed elements of a partly named R list.
  bool any_string = false;
  for (const auto& entry : dict) any_string = any_string || entry.key().isString();
  SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(dict.size())));
  SEXP names = PROTECT(Rf_allocVector(STRSXP, static_cast<R_xlen_t>(dict.size())));
  R_xlen_t i = 0;
  for (const auto& entry : dict) {
    const c10::IValue& key = entry.key();
    std::string text = key.isString()              ? key.toStringRef()
                       : key.isInt() && any_string ? std::string()
                       : key.isInt()               ? std::to_string(key.toInt())
                       : key.isDouble()            ? std::to_string(key.toDouble())
                                                   : key.tagKind();
    SET_STRING_ELT(names, i, Rf_mkCharCE(text.c_str(), CE_UTF8));
    SET_VECTOR_ELT(out, i, r_of(entry.value()));
    ++i;
  }
  Rf_setAttrib(out, R_NamesSymbol, names);
  UNPROTECT(2);
  return out;
}

SEXP r_of(const c10::IValue& v) {
  if (v.isNone()) return R_NilValue;
  if (v.isTensor()) return make_tensor(v.toTensor());
  if (v.isDouble()) return Rf_ScalarReal(v.toDouble());
  if (v.isInt()) return r_int64(v.toInt());  // R's integer saved comes back one
  if (v.isBool()) return Rf_ScalarLogical(v.toBool());
  if (v.isString()) {
    if (is_global(v)) {
      value_error("The file holds a Python object (`" + global_name(v) +
                  "`) that R has no value for.");
    }
    const std::string& text = v.toStringRef();
    return Rf_ScalarString(Rf_mkCharLenCE(text.data(), static_cast<int>(text.size()), CE_UTF8));
  }
  if (v.isGenericDict()) return r_of_dict(v.toGenericDict());
  if (v.isList() || v.isTuple()) {
    std::vector<c10::IValue> items;
    if (v.isTuple()) {
      const auto& e = v.toTupleRef().elements();
      items.assign(e.begin(), e.end());
    } else {
      items = v.toListRef().vec();
    }
    SEXP out = PROTECT(Rf_allocVector(VECSXP, static_cast<R_xlen_t>(items.size())));
    for (size_t i = 0; i < items.size(); ++i) {
      SET_VECTOR_ELT(out, static_cast<R_xlen_t>(i), r_of(items[i]));
    }
    UNPROTECT(1);
    return out;
  }
  throw Error("value_error", "the file holds a " + v.tagKind() + ", which has no R value.");
}

}  // namespace

// The bytes of PyTorch's format for `x` (a raw vector).
extern "C" SEXP C_pickle_save(SEXP x) {
  AMPKIT_R_BEGIN
  const std::vector<char> bytes = save_archive(ivalue_of(x, "obj"));
  SEXP out = PROTECT(Rf_allocVector(RAWSXP, static_cast<R_xlen_t>(bytes.size())));
  if (!bytes.empty()) std::memcpy(RAW(out), bytes.data(), bytes.size());
  UNPROTECT(1);
  return out;
  AMPKIT_R_END
}

extern "C" SEXP C_pickle_load(SEXP raw) {
  AMPKIT_R_BEGIN
  const char* data = reinterpret_cast<const char*>(RAW(raw));
  const size_t size = static_cast<size_t>(XLENGTH(raw));
  if (size < 4 || std::memcmp(data, "PK\x03\x04", 4) != 0) {
    value_error(
        "The file is not in PyTorch's zip format (what torch.save() writes since PyTorch "
        "1.6; a file saved with _use_new_zipfile_serialization=False, or by R torch, is "
        "not).");
  }
  caffe2::serialize::PyTorchStreamReader archive(std::make_shared<RawReader>(data, size));
  if (archive.hasRecord("byteorder")) {
    auto [order, n] = archive.getRecord("byteorder");
    if (std::string(static_cast<const char*>(order.get()), n) != "little") {
      value_error("The file's tensors are big-endian, which this machine cannot read.");
    }
  }
  auto [pickle, n] = archive.getRecord("data.pkl");
  PickleReader reader(std::string(static_cast<const char*>(pickle.get()), n), archive);
  return r_of(reader.read());
  AMPKIT_R_END
}

}  // namespace ampkit_r
