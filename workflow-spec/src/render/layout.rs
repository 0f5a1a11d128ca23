//! A small layered layout for the SVG renderer, in integer pixels.
//!
//! 1. Layers: a node's layer is the length of the longest dependency path from a root
//!    (nodes are taken in topological order, earliest declared first; in a cyclic graph
//!    the earliest unplaced node is forced in and its unplaced dependencies ignored).
//! 2. Edges spanning several layers get a thin dummy node in every layer they cross, so a
//!    long edge runs through a lane of its own instead of through boxes.
//! 3. Order in a layer: the first layer keeps declaration order; every next one is sorted
//!    by the barycenter of each node's parents' positions (ties: declaration order). A few
//!    sweeps up and down by barycenters, each followed by swaps of neighbours that remove
//!    crossings, may improve on that; the order with the fewest crossings wins.
//! 4. X: each node wants its center under the mean of its parents' centers; a sweep from
//!    left to right pushes it right of its left neighbour plus a gap, then the row is
//!    shifted back so it is centered on what it wanted. Boxes in a row never overlap.
//! 5. Y: rows stack from top to bottom. Each row reserves a band above its boxes for the
//!    labels of the edges coming in (one per node: its condition) and the arrowheads.
//!
//! A node's footprint is as wide as its box or its label, whichever is wider, so neither
//! boxes nor labels overlap, in a row or across rows.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Space around the whole drawing.
pub(crate) const MARGIN: i64 = 20;
/// Horizontal space between two footprints in a row.
const H_GAP: i64 = 24;
/// Vertical space between the bottom of a row and the top of the next one.
const V_GAP: i64 = 24;
/// The band above a row's boxes: label height, a little air and the arrowheads.
const BAND: i64 = 32;
/// The height of an edge label.
pub(crate) const LABEL_HEIGHT: i64 = 16;
/// Where an edge label starts below the top of its row.
const LABEL_TOP: i64 = 2;
/// The width of the lane a long edge takes in a row it crosses.
const DUMMY_WIDTH: i64 = 12;
/// How many up-and-down sweeps try to reduce edge crossings.
const SWEEPS: usize = 4;
/// Above this many boxes (dummy boxes of long edges included), crossings are not reduced.
const CROSSING_LIMIT: usize = 400;

/// How many passes of neighbour swaps may run after each sweep.
const TRANSPOSE_PASSES: usize = 8;

/// What the layout needs to know about one node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeSize {
    /// The box width.
    pub(crate) width: i64,
    /// The box height.
    pub(crate) height: i64,
    /// The width of the label drawn above the box on its incoming edges; 0 for none.
    pub(crate) label_width: i64,
}

/// An axis-aligned rectangle: top-left corner and size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rect {
    /// Left edge.
    pub(crate) x: i64,
    /// Top edge.
    pub(crate) y: i64,
    /// Width.
    pub(crate) width: i64,
    /// Height.
    pub(crate) height: i64,
}

impl Rect {
    /// The x of the center.
    pub(crate) fn center_x(&self) -> i64 {
        self.x + self.width / 2
    }

    /// The y of the bottom edge.
    pub(crate) fn bottom(&self) -> i64 {
        self.y + self.height
    }

    /// Whether the two rectangles share any area (touching edges do not count).
    #[cfg(test)]
    pub(crate) fn overlaps(&self, other: &Rect) -> bool {
        self.x < other.x + other.width
            && other.x < self.x + self.width
            && self.y < other.y + other.height
            && other.y < self.y + self.height
    }
}

/// Where everything goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The box of each node, by node index.
    pub(crate) boxes: Vec<Rect>,
    /// The label above each node, for nodes with a label width.
    pub(crate) labels: Vec<Option<Rect>>,
    /// The polyline of each edge, by edge index, from the dependency's box to the
    /// dependent's; empty for a self-loop or an out-of-range index.
    pub(crate) routes: Vec<Vec<(i64, i64)>>,
    /// The width of the drawing.
    pub(crate) width: i64,
    /// The height of the drawing.
    pub(crate) height: i64,
}

/// A node of the layered graph: a real node or a lane of a long edge.
#[derive(Clone, Copy, Debug)]
struct Slot {
    layer: usize,
    width: i64,
    /// For real nodes, the node index; for lanes, the index of the edge's target.
    tie: usize,
}

/// Lays out `sizes.len()` nodes joined by `edges` (`(from, to)`: `from` is drawn above).
pub(crate) fn layout(sizes: &[NodeSize], edges: &[(usize, usize)]) -> Layout {
    let n = sizes.len();
    let valid = |&(from, to): &(usize, usize)| from < n && to < n && from != to;
    let layer = layers(n, edges.iter().copied().filter(valid));

    // Slots: the real nodes first, then the lanes of long edges.
    let mut slots: Vec<Slot> = (0..n)
        .map(|node| Slot {
            layer: layer[node],
            width: sizes[node].width.max(sizes[node].label_width).max(0),
            tie: node,
        })
        .collect();
    let mut parents: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut lanes: Vec<Vec<usize>> = vec![Vec::new(); edges.len()];
    for (edge, &(from, to)) in edges.iter().enumerate() {
        if !valid(&(from, to)) || layer[to] <= layer[from] {
            continue;
        }
        let mut above = from;
        for lane_layer in layer[from] + 1..layer[to] {
            let slot = slots.len();
            slots.push(Slot {
                layer: lane_layer,
                width: DUMMY_WIDTH,
                tie: to,
            });
            parents.push(vec![above]);
            lanes[edge].push(slot);
            above = slot;
        }
        parents[to].push(above);
    }

    let depth = layer.iter().max().map_or(0, |max| max + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for (slot, info) in slots.iter().enumerate() {
        rows[info.layer].push(slot);
    }

    // Order: rows by the barycenter of the parents' positions (ties: declaration order),
    // then a few sweeps up (by children) and down (by parents), each followed by swaps of
    // neighbours that remove crossings, keeping the order with the fewest crossings.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); slots.len()];
    for (slot, above) in parents.iter().enumerate() {
        for &parent in above {
            children[parent].push(slot);
        }
    }
    let mut position = vec![0usize; slots.len()];
    for row in &mut rows {
        let ties: Vec<usize> = row.iter().map(|&slot| slots[slot].tie).collect();
        sort_row(row, &parents, &mut position, &ties);
    }
    // Crossing reduction is quadratic in the edges between two rows; beyond a few hundred
    // boxes a diagram is not read for its crossings, so keep the expansion linear there.
    let sweeps = if slots.len() > CROSSING_LIMIT {
        0
    } else {
        SWEEPS
    };
    if sweeps > 0 {
        transpose(&mut rows, &parents, &children, &mut position);
    }
    let mut best = (
        if sweeps > 0 {
            crossings(&rows, &children, &position)
        } else {
            0
        },
        rows.clone(),
    );
    for _ in 0..sweeps {
        if best.0 == 0 {
            break;
        }
        for row in rows.iter_mut().rev().skip(1) {
            sort_row(row, &children, &mut position, &[]);
        }
        for row in rows.iter_mut().skip(1) {
            sort_row(row, &parents, &mut position, &[]);
        }
        transpose(&mut rows, &parents, &children, &mut position);
        let count = crossings(&rows, &children, &position);
        if count < best.0 {
            best = (count, rows.clone());
        }
    }
    let rows = best.1;

    // X: under the parents, pushed apart left to right, then recentered.
    let mut left = vec![0i64; slots.len()];
    for row in &rows {
        let mut wanted = Vec::with_capacity(row.len());
        let mut right_of_previous: Option<i64> = None;
        for &slot in row {
            let width = slots[slot].width;
            let parent_centers = parents[slot].iter().map(|&p| left[p] + slots[p].width / 2);
            let want = match mean_i64(parent_centers) {
                Some(center) => center - width / 2,
                None => right_of_previous.map_or(0, |right| right + H_GAP),
            };
            let at = match right_of_previous {
                Some(right) => want.max(right + H_GAP),
                None => want,
            };
            wanted.push(want);
            left[slot] = at;
            right_of_previous = Some(at + width);
        }
        if !row.is_empty() {
            let count = row.len() as i64;
            let drift: i64 = row
                .iter()
                .zip(&wanted)
                .map(|(&slot, &want)| want - left[slot])
                .sum();
            let shift = drift / count;
            for &slot in row {
                left[slot] += shift;
            }
        }
    }
    let min_left = left.iter().copied().min().unwrap_or(0);
    for at in &mut left {
        *at += MARGIN - min_left;
    }
    let width = (0..slots.len())
        .map(|slot| left[slot] + slots[slot].width)
        .max()
        .map_or(2 * MARGIN, |right| right + MARGIN);

    // Y: rows top to bottom; the first row has a band only if something comes into it.
    let mut has_edge_in = vec![false; n];
    for &(_, to) in edges.iter().filter(|edge| valid(edge)) {
        has_edge_in[to] = true;
    }
    let mut has_band = vec![true; depth];
    if let Some(first) = has_band.first_mut() {
        *first = (0..n)
            .any(|node| layer[node] == 0 && (sizes[node].label_width > 0 || has_edge_in[node]));
    }
    let mut row_top = vec![0i64; depth];
    let mut box_top = vec![0i64; depth];
    let mut row_bottom = vec![0i64; depth];
    let mut y = MARGIN;
    for (index, row) in rows.iter().enumerate() {
        let tallest = row
            .iter()
            .filter(|&&slot| slot < n)
            .map(|&slot| sizes[slot].height.max(0))
            .max()
            .unwrap_or(0);
        row_top[index] = y;
        box_top[index] = y + if has_band[index] { BAND } else { 0 };
        row_bottom[index] = box_top[index] + tallest;
        y = row_bottom[index] + V_GAP;
    }
    let height = row_bottom
        .last()
        .map_or(2 * MARGIN, |bottom| bottom + MARGIN);

    let boxes: Vec<Rect> = (0..n)
        .map(|node| {
            let size = sizes[node];
            Rect {
                x: left[node] + (slots[node].width - size.width.max(0)) / 2,
                y: box_top[layer[node]],
                width: size.width.max(0),
                height: size.height.max(0),
            }
        })
        .collect();
    let labels = (0..n)
        .map(|node| {
            let label_width = sizes[node].label_width;
            (label_width > 0).then(|| Rect {
                x: left[node] + (slots[node].width - label_width) / 2,
                y: row_top[layer[node]] + LABEL_TOP,
                width: label_width,
                height: LABEL_HEIGHT,
            })
        })
        .collect();

    let routes = edges
        .iter()
        .enumerate()
        .map(|(edge, &(from, to))| {
            if !valid(&(from, to)) {
                return Vec::new();
            }
            let (source, target) = (boxes[from], boxes[to]);
            let mut points = vec![(source.center_x(), source.bottom())];
            if layer[to] > layer[from] {
                points.push((source.center_x(), row_bottom[layer[from]]));
                for &lane in &lanes[edge] {
                    let x = left[lane] + DUMMY_WIDTH / 2;
                    let lane_layer = slots[lane].layer;
                    points.push((x, row_top[lane_layer]));
                    points.push((x, row_bottom[lane_layer]));
                }
                points.push((target.center_x(), row_top[layer[to]]));
            }
            points.push((target.center_x(), target.y));
            points.dedup();
            points
        })
        .collect();

    Layout {
        boxes,
        labels,
        routes,
        width,
        height,
    }
}

/// The layer of each node: the longest path from a root, tolerant of cycles.
fn layers(n: usize, edges: impl Iterator<Item = (usize, usize)>) -> Vec<usize> {
    let mut preds = vec![Vec::new(); n];
    let mut succs = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for (from, to) in edges {
        preds[to].push(from);
        succs[from].push(to);
        indegree[to] += 1;
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..n)
        .filter(|&node| indegree[node] == 0)
        .map(Reverse)
        .collect();
    let mut placed = vec![false; n];
    let mut layer = vec![0usize; n];
    let mut next_unplaced = 0;
    let mut done = 0;
    while done < n {
        let node = match ready.pop() {
            Some(Reverse(node)) => node,
            None => {
                // A cycle: force in the earliest declared node still waiting.
                while placed[next_unplaced] {
                    next_unplaced += 1;
                }
                next_unplaced
            }
        };
        if placed[node] {
            continue;
        }
        layer[node] = preds[node]
            .iter()
            .filter(|&&pred| placed[pred])
            .map(|&pred| layer[pred] + 1)
            .max()
            .unwrap_or(0);
        placed[node] = true;
        done += 1;
        for &next in &succs[node] {
            indegree[next] -= 1;
            if indegree[next] == 0 && !placed[next] {
                ready.push(Reverse(next));
            }
        }
    }
    layer
}

/// Sorts `row` by the mean position of each slot's `neighbours` (a slot without any keeps
/// its place as its key), ties broken by `ties` when given, else by the current order;
/// then records the new positions.
fn sort_row(row: &mut [usize], neighbours: &[Vec<usize>], position: &mut [usize], ties: &[usize]) {
    let mut keyed: Vec<(f64, usize, usize)> = row
        .iter()
        .enumerate()
        .map(|(at, &slot)| {
            let key = mean(neighbours[slot].iter().map(|&n| position[n] as f64));
            (
                key.unwrap_or(at as f64),
                ties.get(at).copied().unwrap_or(at),
                slot,
            )
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    for (at, (_, _, slot)) in keyed.into_iter().enumerate() {
        row[at] = slot;
        position[slot] = at;
    }
}

/// Swaps neighbours in a row while that removes crossings with the rows above and below.
fn transpose(
    rows: &mut [Vec<usize>],
    parents: &[Vec<usize>],
    children: &[Vec<usize>],
    position: &mut [usize],
) {
    // Crossings among the edges of `u` and `v` to one neighbouring row, `u` left of `v`.
    let pair = |links: &[Vec<usize>], u: usize, v: usize, position: &[usize]| -> usize {
        links[u]
            .iter()
            .map(|&a| {
                links[v]
                    .iter()
                    .filter(|&&b| position[a] > position[b])
                    .count()
            })
            .sum()
    };
    for _ in 0..TRANSPOSE_PASSES {
        let mut improved = false;
        for row in rows.iter_mut() {
            for at in 1..row.len() {
                let (u, v) = (row[at - 1], row[at]);
                let kept = pair(parents, u, v, position) + pair(children, u, v, position);
                let swapped = pair(parents, v, u, position) + pair(children, v, u, position);
                if swapped < kept {
                    row.swap(at - 1, at);
                    position[u] = at;
                    position[v] = at - 1;
                    improved = true;
                }
            }
        }
        if !improved {
            break;
        }
    }
}

/// How many pairs of edges between adjacent rows cross.
fn crossings(rows: &[Vec<usize>], children: &[Vec<usize>], position: &[usize]) -> usize {
    let mut count = 0;
    for row in rows {
        let edges: Vec<(usize, usize)> = row
            .iter()
            .flat_map(|&slot| children[slot].iter().map(move |&child| (slot, child)))
            .map(|(from, to)| (position[from], position[to]))
            .collect();
        for (i, a) in edges.iter().enumerate() {
            count += edges[i + 1..]
                .iter()
                .filter(|b| (a.0 < b.0 && a.1 > b.1) || (a.0 > b.0 && a.1 < b.1))
                .count();
        }
    }
    count
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum / count as f64)
}

fn mean_i64(values: impl Iterator<Item = i64>) -> Option<i64> {
    let (sum, count) = values.fold((0i64, 0i64), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum.div_euclid(count))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator (an LCG), so the "random" graphs never change.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, below: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % below
        }
    }

    fn assert_no_overlap(sizes: &[NodeSize], edges: &[(usize, usize)]) -> Layout {
        let layout = layout(sizes, edges);
        let mut rects: Vec<(String, Rect)> = Vec::new();
        for (node, rect) in layout.boxes.iter().enumerate() {
            assert_eq!(
                (rect.width, rect.height),
                (sizes[node].width, sizes[node].height)
            );
            rects.push((format!("box {node}"), *rect));
        }
        for (node, label) in layout.labels.iter().enumerate() {
            assert_eq!(label.is_some(), sizes[node].label_width > 0);
            if let Some(rect) = label {
                rects.push((format!("label {node}"), *rect));
            }
        }
        for (i, (name, rect)) in rects.iter().enumerate() {
            assert!(rect.x >= 0 && rect.y >= 0, "{name} {rect:?} starts outside");
            assert!(
                rect.x + rect.width <= layout.width && rect.bottom() <= layout.height,
                "{name} {rect:?} ends outside {}x{}",
                layout.width,
                layout.height
            );
            for (other_name, other) in &rects[i + 1..] {
                assert!(
                    !rect.overlaps(other),
                    "{name} {rect:?} overlaps {other_name} {other:?}"
                );
            }
        }
        for (edge, route) in layout.routes.iter().enumerate() {
            let (from, to) = edges[edge];
            if from == to || from >= sizes.len() || to >= sizes.len() {
                assert!(route.is_empty());
                continue;
            }
            assert!(route.len() >= 2, "edge {edge} has a route");
            let (boxes, first, last) = (&layout.boxes, route[0], route[route.len() - 1]);
            assert_eq!(first, (boxes[from].center_x(), boxes[from].bottom()));
            assert_eq!(last, (boxes[to].center_x(), boxes[to].y));
        }
        layout
    }

    #[test]
    fn a_random_dag_of_fifty_nodes_has_no_overlaps() {
        let mut rng = Lcg(0x5eed);
        let n = 50;
        let sizes: Vec<NodeSize> = (0..n)
            .map(|_| NodeSize {
                width: 60 + rng.next(240) as i64,
                height: 30 + rng.next(70) as i64,
                label_width: if rng.next(3) == 0 {
                    40 + rng.next(300) as i64
                } else {
                    0
                },
            })
            .collect();
        let mut edges = Vec::new();
        for to in 1..n {
            for _ in 0..1 + rng.next(3) {
                let from = rng.next(to as u64) as usize;
                if !edges.contains(&(from, to)) {
                    edges.push((from, to));
                }
            }
        }
        let layout = assert_no_overlap(&sizes, &edges);
        // Dependents sit below their dependencies.
        for &(from, to) in &edges {
            assert!(layout.boxes[from].bottom() < layout.boxes[to].y);
        }
    }

    #[test]
    fn a_wide_fan_out_of_a_hundred_has_no_overlaps() {
        let mut sizes = vec![NodeSize {
            width: 120,
            height: 40,
            label_width: 0,
        }];
        let mut edges = Vec::new();
        for child in 1..=100 {
            sizes.push(NodeSize {
                width: 80 + (child % 7) * 10,
                height: 40 + (child % 3) * 16,
                label_width: if child % 4 == 0 { 150 } else { 0 },
            });
            edges.push((0, child as usize));
        }
        let layout = assert_no_overlap(&sizes, &edges);
        // The parent is centered over its children.
        let (first, last) = (layout.boxes[1], layout.boxes[100]);
        let middle = (first.x + last.x + last.width) / 2;
        assert!((layout.boxes[0].center_x() - middle).abs() < 100);
    }

    #[test]
    fn long_edges_run_through_lanes_beside_the_boxes() {
        let size = NodeSize {
            width: 100,
            height: 40,
            label_width: 0,
        };
        // 0 -> 1 -> 2 -> 3, and 0 -> 3 skipping two layers.
        let edges = [(0, 1), (1, 2), (2, 3), (0, 3)];
        let layout = assert_no_overlap(&[size; 4], &edges);
        // Source bottom, a lane's top and bottom in each of the two rows crossed, the
        // target's row top and box top.
        let route = &layout.routes[3];
        assert_eq!(route.len(), 1 + 2 * 2 + 2, "{route:?}");
        let lane_x = route[1].0;
        assert!(route[1..5].iter().all(|(x, _)| *x == lane_x), "{route:?}");
        for node in [1, 2] {
            let b = layout.boxes[node];
            assert!(
                lane_x < b.x || lane_x > b.x + b.width,
                "lane crosses box {node}"
            );
        }
    }

    #[test]
    fn cycles_bad_indices_and_nothing_do_not_panic() {
        let size = NodeSize {
            width: 50,
            height: 20,
            label_width: 30,
        };
        assert_no_overlap(
            &[size; 3],
            &[(0, 1), (1, 2), (2, 0), (1, 1), (7, 0), (0, 9)],
        );
        let empty = layout(&[], &[(0, 1)]);
        assert_eq!((empty.width, empty.height), (2 * MARGIN, 2 * MARGIN));
        assert_eq!(empty.routes, vec![Vec::new()]);
    }
}
