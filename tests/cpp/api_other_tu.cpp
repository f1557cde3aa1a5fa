// A second translation unit including Latte.hpp (ODR and link check).
#include "Latte.hpp"

int OtherTranslationUnit(int x) {
  LATTE_RAII();
  LATTE_PULSE("cpp.other.pulse");
  return LATTE_FIELD(x + 1);
}
