// A second translation unit including Latte.hpp (ODR and link check).
#include "Latte.hpp"

int OtherTranslationUnit(int x) {
  LATTE_RAII();
  LATTE_PULSE("cpp.other.pulse");
  return LATTE_FIELD(x + 1);
}

// Records under a literal that the main translation unit looks up by its
// own copy of the same literal (the linker merges equal literals).
void OtherTuLiteral(int n) {
  for (int i = 0; i < n; i++) {
    Latte::Fast::Start("cpp.other.literal");
    Latte::Fast::Stop(nullptr);
  }
}

// This translation unit's address of that literal.
const char *OtherTuLiteralPtr() { return "cpp.other.literal"; }
