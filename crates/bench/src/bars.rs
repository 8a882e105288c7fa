//! How a figure is printed beside the bar it is held to.

/// A figure and its bar, to `places` places, or more where that many would show two different
/// values as one (a bar missed by a hair reads as missed, not "0.85 (bar 0.85) missed").
pub fn apart(v: f64, bar: f64, places: usize) -> (String, String) {
    let mut places = places;
    while places < 6 && v != bar && format!("{v:.places$}") == format!("{bar:.places$}") {
        places += 1;
    }
    (format!("{v:.places$}"), format!("{bar:.places$}"))
}
