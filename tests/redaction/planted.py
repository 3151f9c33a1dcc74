"""Secrets of each kind the issue names, shaped as their providers document them (made-up values): (text, secret)."""

from __future__ import annotations

# Each kind the issue names, shaped as the provider documents it (made-up values).
AWS_KEY_ID = "AKIAQ7XPZ4RBN2KDM5EW"
AWS_SECRET = "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"
KINDS = {
    "aws key id": (f"aws_access_key_id = {AWS_KEY_ID}", AWS_KEY_ID),
    "aws secret": (f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    "aws secret in json": (f'{{"SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET),
    "gcp api key": ("key=AIzaSyD4x9Qm2Vb7Nc1Lk8Jh3Gf6Ds5Aa0Pp9Oo ", "AIzaSyD4x9Qm2Vb7Nc1Lk8Jh3Gf6Ds5Aa0Pp9Oo"),
    "openai project key": ("sk-proj-" + "Ab3dE" * 15 + "T3BlbkFJ" + "xY9zW" * 15, "T3BlbkFJxY9zW"),
    "openai key without marker": ("OPENAI_API_KEY=sk-proj-4fGh7Jk2Lm9Np3Qr6St8Uv1Wx5Yz0Ab", "4fGh7Jk2Lm9Np3Qr6St8Uv1Wx5Yz0Ab"),
    "anthropic key": ("sk-ant-api03-" + "Zq8_Yw-7Xv6U" * 7 + "tS5rQ4pO3nM2lK1jAA", "Zq8_Yw-7Xv6U"),
    "hugging face token": ("HF_TOKEN hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh used", "hf_AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"),
    "github classic": ("ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s", "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngPurp0s3s"),
    "github fine grained": ("github_pat_" + "11ABCDEFG0" * 8 + "xy", "11ABCDEFG011ABCDEFG0"),
    "stripe": ("stripe.api_key = 'sk_live_51HxQ2eLkJ8mN4pR7sT0vW3yZ'", "51HxQ2eLkJ8mN4pR7sT0vW3yZ"),
    "slack bot": ("xoxb-2948571036-3958271046-Ab9Cd8Ef7Gh6Ij5Kl4Mn3Op2", "Ab9Cd8Ef7Gh6Ij5Kl4Mn3Op2"),
    "slack short shape": ("SLACK=xoxp-1234567890-abcdefghij", "xoxp-1234567890-abcdefghij"),
    "bearer": ('curl -H "Authorization: Bearer eyTok3nAbC.d3fGhI-jKl" https://api', "eyTok3nAbC.d3fGhI-jKl"),
    "bearer in a log line": ("sent Authorization: Bearer 9f8e7d6c5b4a39281706 upstream", "9f8e7d6c5b4a39281706"),
    "basic auth header": ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw"),
    "private key": (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "b3BlbnNzaC1rZXktdjEAAAAA\n" * 4 + "-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
    ),
    "password in url": ("DATABASE_URL=postgres://app:Pl4inT3xtPw@db:5432/x", "Pl4inT3xtPw"),
    "password assigned": ('password: "correct-horse-battery"', "correct-horse-battery"),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "dozjgNryP4J3jVmNHl0w5N"),
    "curl user": ("curl -u deploy:Sup3rS3cretPw https://ci", "Sup3rS3cretPw"),
    "quoted multi-word password": ('db_password = "correct horse battery staple"', "battery staple"),
    "json password with spaces": ('{"password": "a b c d"}', "a b c d"),
    "json-escaped password": ('{\\"password\\": \\"fine tall tree\\"}', "fine tall tree"),
    "single-quoted secret": ("client_secret = 'two words here'", "two words here"),
    "mysql -p attached": ("mysql -h db -u root -pS3cretPass shop < dump.sql", "S3cretPass"),
    "mysqldump quoted -p": ("mysqldump -u app -p'Qu0ted Pw' shop", "Qu0ted Pw"),
    "sshpass -p": ("sshpass -p Hunter2pass ssh deploy@host", "Hunter2pass"),
    "redis-cli -a": ("redis-cli -h cache -a R3disPassw0rd ping", "R3disPassw0rd"),
    "value after a labelled key": (
        "aws_secret: aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
}
