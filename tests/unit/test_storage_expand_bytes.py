"""storage expand writes the same bytes as before issue 32's speed-up (sha256 of main's output at 117b27f)."""

from __future__ import annotations

import hashlib

import pytest

from dsctl.storage.api import generate_chains
from dsctl.storage.chaintable import IdScheme
from dsctl.storage.crosscheck import FILE_NAMES
from dsctl.storage.expand import expand

EXPECTED = {
    (25, 5, 16, 3): {
        "create_new_chain_targets_cmd.txt": "e04f3e316ab620410278b4e5956f1cac51c0ea077d7ead33eeb4d5bf038fd29c",
        "create_target_cmd.txt": "172fe4382daf65a691df2623678b0fe8e3cbc768cea179310abebcbe86d0fedf",
        "generated_chain_table.csv": "14e7b47474d5ae78e3abdf6d8afa6981857a7d1829f38c4add338778fe63e11f",
        "generated_chains.csv": "a62d852be591b13e776a3cbc27879ae2aae8bf9bff9e2516e11115efbcbdf5ca",
        "migration_steps.txt": "dcc55f356e9ac2d30f62856b5b3ff563d8b6f7b5ca915edf02efd7c29ffc643c",
        "new_chains.csv": "f9b6b7fa731a2cf632c5b1187b9a8a7b72fd685df96c6f359e15c1072ae24deb",
        "remove_target_cmd.txt": "94e8f9f3649ff934beb985e49acd915ec494681c9ca149b2eaf8d6e903d386e4"
    },
    (12, 4, 4, 3): {
        "create_new_chain_targets_cmd.txt": "6372fee7cdc080b4a5eca5b774c0fb786736c8ee530bab0b07cedecfd5441d43",
        "create_target_cmd.txt": "f9bd00e55fe16cef1a4265a227e88549637aef801f2de349e2c4dcdac2d32124",
        "generated_chain_table.csv": "cca049ae9b24afb19307b63303495e3d4009a94c9889d912e1efc7d0514258d5",
        "generated_chains.csv": "290f42fe959da7829c9ddfdabb8c338ed6a9862b3b91efa0f9fcd1c196003a94",
        "migration_steps.txt": "19534d7c1e9dbfdc33028976acae076af1a24e573fbe35620565d1952a7d3350",
        "new_chains.csv": "e43e620b77fc198161b45e15406a02e94d2e4b2b314afa04d8a28f31b9a3dac1",
        "remove_target_cmd.txt": "613e915533ed9fe3369642f257fff104fd8339bc88133ceade35e1bea9c1ab33"
    },
    (40, 7, 8, 2): {
        "create_new_chain_targets_cmd.txt": "6627e5b6a84793ff4b7808d23d43006d292af608c0356a2d1ee332c6da7833f1",
        "create_target_cmd.txt": "97b5fca4c200b0b173cb44c1815acab35dfc123c709d434582a3254780fc1ed0",
        "generated_chain_table.csv": "e360caa622dc1ba0b45c629d6abf63fe2dd62ad9a146515670eec3dd318ae4e9",
        "generated_chains.csv": "e1914e169aabac4e7f6fab248786daff6eb33218e4b21c9a88d8529f2d45111b",
        "migration_steps.txt": "5b313232a806c60271b789a54b654d72015e15d066dac97a5ed4dfbefa411f0a",
        "new_chains.csv": "0f5a655989a7ecc5b41ab618b3b811b94c2ae6545701aa140f45632f29baf7bb",
        "remove_target_cmd.txt": "338a33264bcaba79c990a9a6e764c2d7bb5f209199d018e9abec9b283d02efb3"
    },
    (30, 10, 4, 4): {
        "create_new_chain_targets_cmd.txt": "9c1ac8b50e1bf6cd510956f9969bc691309b386f3df3529bf583023605b43b6a",
        "create_target_cmd.txt": "a25ce50f35a6c6f60c43ad6f7c4e73327401537c08bbc00c138f523e110a311a",
        "generated_chain_table.csv": "dd65b24036348df953ee3e0dc2fec8b1e9219dd4515cdddcd224f594be7baa3f",
        "generated_chains.csv": "11e608f3c7de4836ac463e21a632728c94d259589d01273ac8e1a7e42227db33",
        "migration_steps.txt": "216ccff6cc9ae4673cd1e0ad96a61a142d16c9235fdad427587e4adaa1bdc4bf",
        "new_chains.csv": "0c145ab6cf37777207403bac977a0ab5fdfff88fe60039ff56899b9e11f60c18",
        "remove_target_cmd.txt": "753adee8eed9b2a53952ac0c3860260c0853349cd5b644d47b8b7a97a305a1f5"
    }
}


@pytest.mark.parametrize("shape", sorted(EXPECTED))
def test_expand_output_is_byte_identical_to_before(shape: tuple[int, int, int, int]) -> None:
    v, n, disks, k = shape
    files = generate_chains(v, disks, k, None, 1, IdScheme()).files_text
    result = expand({name: files[name] for name in FILE_NAMES}, "src", n, 1e12, 0.0, 0.0)
    got = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in sorted(result.files_text.items())}
    assert got == EXPECTED[shape]
