"""Short encyclopedic paragraphs for the toy *Wikipedia text* intervention.

The paper's pool is English Wikipedia (CC BY-SA), which lives outside the package. These paragraphs were
written for this project in an encyclopedic register so the toy intervention works with no data files;
each has at least 100 characters, like the reference pool.
"""

from __future__ import annotations

TOY_PARAGRAPHS: tuple[str, ...] = (
    (
        "The Danube is the second-longest river in Europe. It rises in the Black Forest and flows east through "
        "ten countries before it reaches the Black Sea, where it forms a wide delta of marshes and lakes."
    ),
    (
        "A lighthouse is a tower with a bright lamp at its top that guides ships at night. Many early "
        "lighthouses burned wood or oil; later ones used lenses to focus the beam so it could be seen far out at sea."
    ),
    (
        "The violin is a string instrument played with a bow. It has four strings tuned in fifths and is the "
        "smallest and highest-pitched member of its family, which also includes the viola and the cello."
    ),
    (
        "Basalt is a dark volcanic rock that forms when lava rich in iron and magnesium cools quickly near the "
        "surface. Most of the ocean floor is made of basalt, and some of it cools into tall columns."
    ),
    (
        "The honey bee lives in large colonies with a single queen, many workers and a few drones. Workers "
        "collect nectar and pollen, build wax combs and share the location of flowers through a dance."
    ),
    (
        "Chess is a board game for two players on a square board of sixty-four cells. Each player starts with "
        "sixteen pieces, and the aim is to trap the opposing king so that it cannot escape capture."
    ),
    (
        "A glacier is a slow river of ice that forms where more snow falls in winter than melts in summer. As "
        "it moves downhill it carves deep valleys and carries rocks far from where they started."
    ),
    (
        "The printing press with movable type spread across Europe in the fifteenth century. It made books "
        "cheaper and faster to produce, which helped ideas travel between cities and languages."
    ),
    (
        "Coral reefs are built by colonies of tiny animals that make hard skeletons of lime. Reefs grow in warm, "
        "clear and shallow seas and give shelter to a great variety of fish and other creatures."
    ),
    (
        "The harbour town grew around a market held on the old stone bridge. Its first church was built of "
        "timber, and a larger one of brick replaced it after a fire in the town's busiest century."
    ),
)
