//! The SVG chart: bound pods per second and cumulative bound pods over time.

use std::fmt::Write as _;

use crate::params::Mode;
use crate::result::RunResult;

/// Throughput over time (pods bound per second) and cumulative bound pods, as SVG.
pub fn svg_chart(results: &[RunResult], title: &str) -> String {
    let colors = [
        (Mode::Vanilla, "#1f77b4"),
        (Mode::Muster, "#d62728"),
        (Mode::Native, "#2ca02c"),
        (Mode::VanillaUnbatched, "#9467bd"),
        (Mode::MusterSecond, "#ff7f0e"),
        (Mode::MusterEveryPod, "#8c564b"),
        (Mode::MusterNominateAll, "#e377c2"),
        (Mode::MusterHttp, "#7f7f7f"),
    ];
    let color = |m: Mode| colors.iter().find(|(x, _)| *x == m).map_or("#000", |c| c.1);
    let (w, h) = (900.0, 640.0);
    let (left, right) = (70.0, 20.0);
    let panel_h = 230.0;
    let tops = [60.0, 360.0];
    let max_t = results
        .iter()
        .filter_map(|r| r.samples.last().map(|s| s.t))
        .fold(1.0f64, f64::max)
        .ceil();
    let rates: Vec<(Mode, Vec<(f64, f64)>)> = results
        .iter()
        .map(|r| {
            let mut last = (0.0, 0usize);
            let pts = r
                .samples
                .iter()
                .map(|s| {
                    let rate = (s.bound - last.1) as f64 / (s.t - last.0).max(1e-9);
                    last = (s.t, s.bound);
                    (s.t, rate)
                })
                .collect();
            (r.mode, pts)
        })
        .collect();
    let max_rate = rates
        .iter()
        .flat_map(|(_, v)| v.iter().map(|x| x.1))
        .fold(1.0f64, f64::max);
    let max_bound = results.iter().map(|r| r.total).max().unwrap_or(1).max(1) as f64;
    let nice = |v: f64| {
        let mag = 10f64.powf(v.log10().floor());
        let n = v / mag;
        let step = if n <= 2.0 {
            0.5
        } else if n <= 5.0 {
            1.0
        } else {
            2.0
        };
        (step * mag, ((v / (step * mag)).ceil()) * step * mag)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="16" text-anchor="middle">{title}</text>"#,
        w / 2.0
    );
    let pw = w - left - right;
    let (tstep, tmax) = nice(max_t);
    for (panel, top) in tops.iter().enumerate() {
        let (ystep, ymax) = if panel == 0 {
            nice(max_rate)
        } else {
            nice(max_bound)
        };
        let ylabel = if panel == 0 {
            "pods bound per second"
        } else {
            "pods bound (cumulative)"
        };
        let x = |t: f64| left + t / tmax * pw;
        let y = |v: f64| top + panel_h - v / ymax * panel_h;
        // Grid and axes.
        let mut v = 0.0;
        while v <= ymax + 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{left}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#ddd"/><text x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"##,
                y(v),
                left + pw,
                left - 6.0,
                y(v) + 4.0,
                v
            );
            v += ystep;
        }
        let mut t = 0.0;
        while t <= tmax + 1e-9 {
            let _ = writeln!(
                s,
                r##"<line x1="{0:.1}" y1="{top}" x2="{0:.1}" y2="{1}" stroke="#eee"/><text x="{0:.1}" y="{2}" text-anchor="middle">{3}</text>"##,
                x(t),
                top + panel_h,
                top + panel_h + 16.0,
                t
            );
            t += tstep;
        }
        let _ = writeln!(
            s,
            r##"<rect x="{left}" y="{top}" width="{pw}" height="{panel_h}" fill="none" stroke="#333"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{ylabel}</text>"#,
            top + panel_h / 2.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">seconds since the first pod was created</text>"#,
            left + pw / 2.0,
            top + panel_h + 34.0
        );
        for (mode, pts) in &rates {
            let r = results.iter().find(|r| r.mode == *mode).unwrap();
            let pts: Vec<(f64, f64)> = if panel == 0 {
                pts.clone()
            } else {
                r.samples.iter().map(|s| (s.t, s.bound as f64)).collect()
            };
            if pts.is_empty() {
                continue;
            }
            let mut d = format!("M{:.1},{:.1}", x(0.0), y(0.0));
            for (t, v) in pts {
                let _ = write!(d, " L{:.1},{:.1}", x(t), y(v));
            }
            let _ = writeln!(
                s,
                r#"<path d="{d}" fill="none" stroke="{}" stroke-width="2"/>"#,
                color(*mode)
            );
        }
    }
    for (i, r) in results.iter().enumerate() {
        let lx = left + 10.0 + i as f64 * 250.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="44" x2="{}" y2="44" stroke="{}" stroke-width="3"/><text x="{}" y="48">{}</text>"#,
            lx + 24.0,
            color(r.mode),
            lx + 30.0,
            r.mode.title()
        );
    }
    s.push_str("</svg>\n");
    s
}
