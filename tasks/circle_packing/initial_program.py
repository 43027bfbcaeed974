"""26 circles in the unit square, as large as they will go: the sum of their radii is the score.

run_packing() returns (centers, radii, sum_radii): 26 (x, y) centres, 26 radii, and their sum.
Every circle must lie inside [0, 1] x [0, 1] and no two may overlap.
"""

import math

N = 26

# EVOLVE-BLOCK-START
ROWS = 5  # @knob int 3..8
MARGIN = 0.1  # @knob float 0.02..0.25
STAGGER = 0.5  # @knob float 0.0..1.0


def place_centers():
    """Rows of circles, evenly spread; every other row shifted sideways by STAGGER."""
    counts = [N // ROWS + (1 if row < N % ROWS else 0) for row in range(ROWS)]
    span = 1.0 - 2.0 * MARGIN
    centers = []
    for row, count in enumerate(counts):
        y = MARGIN + span * (row / (ROWS - 1) if ROWS > 1 else 0.5)
        shift = STAGGER if row % 2 else 0.0
        for k in range(count):
            x = MARGIN + span * ((k + shift) / (count - 1 + shift) if count > 1 else 0.5)
            centers.append((x, y))
    return centers


def grow_radii(centers):
    """The largest radii these centres allow, found greedily: start each circle at half the
    distance to its nearest neighbour (capped by the walls), then let each in turn grow
    into whatever room the others leave."""
    n = len(centers)
    distance = [[math.dist(a, b) for b in centers] for a in centers]
    walls = [min(x, y, 1.0 - x, 1.0 - y) for x, y in centers]
    radii = [
        max(0.0, min(walls[i], min(distance[i][j] for j in range(n) if j != i) / 2))
        for i in range(n)
    ]
    for i in range(n):
        room = [distance[i][j] - radii[j] for j in range(n) if j != i]
        radii[i] = max(0.0, min([walls[i], *room]))
    return radii


def construct_packing():
    centers = place_centers()
    return centers, grow_radii(centers)


# EVOLVE-BLOCK-END


def run_packing():
    centers, radii = construct_packing()
    return centers, radii, sum(radii)


if __name__ == "__main__":
    _, radii, total = run_packing()
    print(f"{len(radii)} circles, sum of radii {total:.6f}")
