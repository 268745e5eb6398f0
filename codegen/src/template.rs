//! Kernel templates: `.cu` files with `{{name}}` holes, filled by [`fill`]. Every hole
//! must be given and every given value must be used, so a template and its emitter
//! cannot drift apart silently (no `format!` strings with escaped braces).

use crate::{CodegenError, Result};

/// Fills `{{key}}` holes in `template` with `values`.
pub fn fill(template: &str, values: &[(&str, &str)]) -> Result<String> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut used = vec![false; values.len()];
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| CodegenError::Plan("template: unclosed {{".into()))?;
        let key = &after[..end];
        let i = values
            .iter()
            .position(|(k, _)| *k == key)
            .ok_or_else(|| CodegenError::Plan(format!("template: no value for {{{{{key}}}}}")))?;
        used[i] = true;
        out.push_str(values[i].1);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(CodegenError::Plan(format!(
            "template: value `{}` has no hole",
            values[i].0
        )));
    }
    Ok(out)
}

/// [`fill`] with owned values (holes built as `(name, String)` pairs).
pub fn fill_owned(template: &str, values: &[(&str, String)]) -> Result<String> {
    let values: Vec<(&str, &str)> = values.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fill(template, &values)
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn fills_every_hole_and_rejects_strays() {
        assert_eq!(
            fill("a {{x}} b {{y}}{{x}}", &[("x", "1"), ("y", "2")]).unwrap(),
            "a 1 b 21"
        );
        assert!(fill("{{x}}", &[]).is_err(), "missing value");
        assert!(fill("x", &[("x", "1")]).is_err(), "unused value");
        assert!(fill("{{x", &[("x", "1")]).is_err(), "unclosed hole");
    }
}
