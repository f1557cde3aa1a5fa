//! `latte plot`'s PNG text: a drawing backend that passes everything to the
//! one it wraps but draws text itself, each glyph where the font puts it.
//!
//! plotters' own text drawing (its `ab_glyph` font) places each glyph's
//! ink at the pen position, leaving out the glyph's left side bearing, and
//! rounds each glyph's offset to whole pixels on its own: narrow glyphs
//! (`i`, `l`, `.`) sit against the glyph before them and the gaps between
//! letters vary by a few pixels. Here a glyph is positioned at the pen
//! (fractional, kerned) and the baseline, and rasterized there, so its
//! ink starts at pen + bearing. The text's box, its anchoring and its
//! rotation are plotters' (`layout_box`, `anchor`, `transform`), so that
//! labels land where plotters laid them out.

use ab_glyph::{Font, FontRef, ScaleFont};
use plotters::prelude::DrawingBackend;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind};

/// A backend that draws text with `font` and everything else with `inner`.
pub struct Glyphs<'f, B> {
    pub inner: B,
    pub font: FontRef<'f>,
}

/// Pixels of `text` drawn at size `size` (px), its baseline at `size / 2`
/// below the box's top as in plotters' layout, each glyph at its kerned
/// pen position: (x, y, coverage).
pub fn text_pixels(font: &FontRef<'_>, size: f32, text: &str) -> Vec<(i32, i32, f32)> {
    let scaled = font.as_scaled(size);
    let (mut pen, mut prev) = (0f32, None);
    let mut out = Vec::new();
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            pen += scaled.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(size, ab_glyph::point(pen, size / 2.0));
        pen += scaled.h_advance(id);
        if let Some(q) = font.outline_glyph(glyph) {
            let b = q.px_bounds();
            q.draw(|x, y, a| out.push((b.min.x as i32 + x as i32, b.min.y as i32 + y as i32, a)));
        }
    }
    out
}

impl<B: DrawingBackend> DrawingBackend for Glyphs<'_, B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(&mut self, ul: BackendCoord, br: BackendCoord, style: &S, fill: bool) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_rect(ul, br, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, path: I, style: &S) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(&mut self, center: BackendCoord, radius: u32, style: &S, fill: bool) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, vert: I, style: &S) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }
    fn blit_bitmap(&mut self, pos: BackendCoord, (iw, ih): (u32, u32), src: &[u8]) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.inner.blit_bitmap(pos, (iw, ih), src)
    }

    fn draw_text<S: BackendTextStyle>(&mut self, text: &str, style: &S, pos: BackendCoord) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        // Anchored as plotters anchors its own text (DrawingBackend's
        // default draw_text): on the box its font measures.
        let ((min_x, min_y), (max_x, max_y)) = style.layout_box(text).map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let (width, height) = (max_x - min_x, max_y - min_y);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let trans = style.transform();
        let (w, h) = self.get_size();
        for (x, y, a) in text_pixels(&self.font, style.size() as f32, text) {
            let (x, y) = trans.transform(x + dx - min_x, y + dy - min_y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && x < w as i32 && y >= 0 && y < h as i32 {
                self.inner.draw_pixel((x, y), color.mix(a as f64))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The left edge of the last run of inked columns of `text`'s pixels.
    fn last_stem(px: &[(i32, i32, f32)]) -> i32 {
        let inked: std::collections::BTreeSet<i32> = px.iter().filter(|p| p.2 > 0.5).map(|p| p.0).collect();
        let mut edge = *inked.iter().next_back().unwrap();
        while inked.contains(&(edge - 1)) {
            edge -= 1;
        }
        edge
    }

    #[test]
    fn a_glyph_s_ink_starts_at_its_pen_and_bearing_whatever_comes_before() {
        let Some(bytes) = super::super::plot::FONT_FILES.iter().find_map(|f| std::fs::read(f).ok()) else {
            eprintln!("no TrueType font here: not checked");
            return;
        };
        let font = FontRef::try_from_slice(&bytes).unwrap();
        let size = 40.0;
        let scaled = font.as_scaled(size);
        let l = scaled.glyph_id('l');
        for before in ["m", "i", ".", "W", "mi.", "1.0"] {
            let mut pen = 0f32;
            let mut prev = None;
            for c in before.chars() {
                let id = scaled.glyph_id(c);
                if let Some(p) = prev {
                    pen += scaled.kern(p, id);
                }
                pen += scaled.h_advance(id);
                prev = Some(id);
            }
            pen += scaled.kern(prev.unwrap(), l);
            let want = (pen + scaled.h_side_bearing(l)).round() as i32;
            let got = last_stem(&text_pixels(&font, size, &format!("{before}l")));
            assert!((got - want).abs() <= 1, "after {before:?}: the l's ink at {got}, its pen + bearing at {want}");
        }
    }
}
