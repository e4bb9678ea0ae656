/*
 * tvm-runtime-rs: TVM's C++ deployment API, header-only over the C ABI (hand-written).
 *
 * Optional<T>: a nullable reference of an ObjectRef type T.
 */
#ifndef TVM_RUNTIME_CONTAINER_OPTIONAL_H_
#define TVM_RUNTIME_CONTAINER_OPTIONAL_H_

#include <tvm/runtime/object.h>

#include <utility>

namespace tvm {
namespace runtime {

/*! \brief The type of NullOpt. */
struct NullOptType {};
/*! \brief An empty Optional. */
constexpr NullOptType NullOpt{};

/*! \brief A `T` or nothing. */
template <typename T>
class Optional : public ObjectRef {
  static_assert(std::is_base_of<ObjectRef, T>::value, "Optional<T> needs an ObjectRef type T");

 public:
  using ContainerType = typename T::ContainerType;
  static constexpr bool _type_is_nullable = true;

  Optional() = default;
  Optional(NullOptType) {}                     // NOLINT(runtime/explicit)
  Optional(std::nullptr_t) {}                  // NOLINT(runtime/explicit)
  Optional(T value) : ObjectRef(std::move(value)) {}  // NOLINT(runtime/explicit)
  TVMRT_OBJECT_REF_CTOR(Optional, ObjectRef)

  /*! \brief The value; throws tvm::Error when empty. */
  T value() const {
    if (!defined()) throw Error("Optional<T>::value() on an empty Optional");
    return detail::UncheckedCast<T>(*this);
  }
  /*! \brief The value, or `other` when empty. */
  T value_or(T other) const { return defined() ? value() : other; }
  /*! \brief Whether a value is held. */
  bool has_value() const { return defined(); }
  explicit operator bool() const { return defined(); }
};

}  // namespace runtime

using runtime::NullOpt;
using runtime::Optional;

}  // namespace tvm

#endif  // TVM_RUNTIME_CONTAINER_OPTIONAL_H_
