"""One made-up secret per format of the catalogue, in a sentence such as a user would paste.

Every value is fake: random characters in the shape the format documents, from a seeded
generator, so the table is the same on every run. ``CASES`` is keyed by the catalogue's
format id; the tests check that the catalogue and this table cover each other.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass

_RNG = random.Random(20261124)
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


def mixed(n: int) -> str:
    """``n`` base64 characters with upper case, lower case and a digit (as AWS secrets have)."""
    return "Aa1" + rand(B64, n - 3)


@dataclass(frozen=True)
class Case:
    format: str  # the catalogue entry that must find it
    secret: str  # what must not survive redaction
    text: str  # the sentence it is pasted in ({s} is the secret)

    @property
    def sentence(self) -> str:
        return self.text.replace("{s}", self.secret)


_PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA"
    + "\n".join(rand(B64, 64) for _ in range(3))
    + "\n-----END RSA PRIVATE KEY-----"
)
_PUTTY = (
    "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: me@host\nPublic-Lines: 1\n"
    f"AAAAB3NzaC1yc2E{rand(B64, 40)}\nPrivate-Lines: 1\n{rand(B64, 64)}\nPrivate-MAC: {rand(HEX, 40)}"
)
_BASIC = base64.b64encode(b"alice:s3cret-pw").decode()

CASES: list[Case] = [
    # issue 9: what was written as it is
    Case("private_key", _PEM, "here is the deploy key:\n{s}\nkeep it safe"),
    Case("putty_private_key", _PUTTY, "my putty key\n{s}"),
    Case("aws_access_key_id", "AKIA" + rand(UPPER, 16), "access key id {s} for prod"),
    Case("aws_secret", mixed(40), "my AWS secret is {s} do not share"),
    Case("password_en", "hunter2-Xy", "the password is {s} for the staging box"),
    Case("password_zh", "Zq8mW2p#", "数据库密码是 {s}，别外传"),
    Case("stripe_key", "sk_live_" + rand(ALNUM, 24), "charge with {s} today"),
    Case("gcp_api_key", "AIza" + rand(URLSAFE, 35), "maps key {s} in the app"),
    Case(
        "jwt",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0." + rand(URLSAFE, 43),
        "session {s} expired",
    ),
    Case("basic_auth", _BASIC, "Authorization: Basic {s}"),
    Case("bearer_token", rand(URLSAFE, 32), "send the header Bearer {s} to the api"),
    Case("url_credentials", "s3cr3t-Pw", "clone https://bob:{s}@git.example.com/repo.git now"),
    Case("curl_user", "admin:Pa55word", "run curl -u {s} https://api.example.com/v1"),
    Case("anthropic_key", "sk-ant-api03-" + rand(URLSAFE, 93) + "AA", "use {s} for claude"),
    Case("keyword_assignment", "Zk29vLq1xP", "set client_secret={s} in the env"),
    Case("secret_phrase_en", "tok9f8e7d6c5b4a", "my api key is {s}."),
    Case("secret_phrase_zh", "Ab12Cd34Ef", "这个服务的密钥是 {s}"),
    # AI providers
    Case("openai_key", "sk-proj-" + rand(URLSAFE, 48), "OPENAI {s}"),
    Case("huggingface_token", "hf_" + rand(ALNUM, 34), "pull with {s}"),
    Case("perplexity_key", "pplx-" + rand(ALNUM, 48), "search via {s}"),
    # code hosting, registries
    Case("github_token", "ghp_" + rand(ALNUM, 36), "push with {s} please"),
    Case(
        "github_fine_grained_pat",
        "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
        "token {s} for the repo",
    ),
    Case("gitlab_token", "glpat-" + rand(URLSAFE, 20), "gitlab {s}"),
    Case("npm_token", "npm_" + rand(ALNUM, 36), "publish with {s}"),
    Case("pypi_token", "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 60), "twine upload -p {s}"),
    Case("rubygems_token", "rubygems_" + rand(HEX, 48), "gem push with {s}"),
    Case("artifactory_key", "AKCp" + rand(ALNUM, 69), "artifactory {s}"),
    # chat
    Case(
        "slack_token",
        f"xoxb-{rand(string.digits, 12)}-{rand(string.digits, 12)}-{rand(ALNUM, 24)}",
        "bot {s} posts there",
    ),
    Case(
        "slack_webhook",
        "T0000000/B0000000/" + rand(ALNUM, 24),
        "post to https://hooks.slack.com/services/{s}",
    ),
    Case(
        "discord_webhook",
        rand(URLSAFE, 68),
        "hook https://discord.com/api/webhooks/123456789012345678/{s}",
    ),
    Case(
        "discord_bot_token",
        "M" + rand(URLSAFE, 23) + "." + rand(URLSAFE, 6) + "." + rand(URLSAFE, 27),
        "the discord bot token {s} is live",
    ),
    Case("telegram_bot_token", rand(string.digits, 9) + ":AA" + rand(URLSAFE, 33), "telegram {s}"),
    # payments, commerce
    Case("stripe_webhook_secret", "whsec_" + rand(ALNUM, 32), "verify with {s}"),
    Case("square_token", "sq0atp-" + rand(URLSAFE, 22), "square {s}"),
    Case("shopify_token", "shpat_" + rand(HEX, 32), "shop admin {s}"),
    Case("shippo_token", "shippo_live_" + rand(HEX, 40), "labels via {s}"),
    Case("easypost_key", "EZAK" + rand(ALNUM, 54), "shipping {s}"),
    # email, SaaS
    Case("sendgrid_key", f"SG.{rand(URLSAFE, 22)}.{rand(URLSAFE, 43)}", "mail with {s}"),
    Case("sendinblue_key", f"xkeysib-{rand(HEX, 64)}-{rand(ALNUM, 16)}", "brevo {s}"),
    Case("mailchimp_key", rand(HEX, 32) + "-us12", "list api {s}"),
    Case("mailgun_key", "key-" + rand(HEX, 32), "mailgun {s}"),
    Case("twilio_api_key", "SK" + rand(HEX, 32), "twilio api {s}"),
    Case("linear_key", "lin_api_" + rand(ALNUM, 40), "issues via {s}"),
    Case("notion_token", "ntn_" + rand(string.digits, 11) + rand(ALNUM, 35), "notion {s}"),
    Case("atlassian_token", "ATATT3" + rand(URLSAFE, 180), "jira {s}"),
    Case("postman_key", f"PMAK-{rand(HEX, 24)}-{rand(HEX, 34)}", "collection {s}"),
    # cloud, infrastructure
    Case("google_oauth_secret", "GOCSPX-" + rand(URLSAFE, 28), "oauth client {s}"),
    Case("google_oauth_token", "ya29." + rand(URLSAFE, 60), "access {s}"),
    Case(
        "azure_storage_key",
        rand(B64, 86) + "==",
        "DefaultEndpointsProtocol=https;AccountName=x;AccountKey={s};EndpointSuffix=core.windows.net",
    ),
    Case(
        "azure_sas_signature",
        rand(ALNUM, 40) + "%3D",
        "https://acct.blob.core.windows.net/c/f.csv?sv=2022-11-02&sig={s}&se=2026-12-01",
    ),
    Case("azure_ad_client_secret", "abc8Q~" + rand(ALNUM + "_~.-", 34), "entra secret {s}"),
    Case("alibaba_access_key_id", "LTAI" + rand(ALNUM, 20), "aliyun {s}"),
    Case("digitalocean_token", "dop_v1_" + rand(HEX, 64), "doctl auth {s}"),
    Case("databricks_token", "dapi" + rand(HEX, 32), "workspace {s}"),
    Case("vault_token", "hvs." + rand(URLSAFE, 90), "VAULT {s}"),
    Case(
        "terraform_cloud_token",
        rand(ALNUM, 14) + ".atlasv1." + rand(URLSAFE, 65),
        "tfc {s}",
    ),
    Case("doppler_token", "dp.pt." + rand(ALNUM, 43), "doppler {s}"),
    Case("pulumi_token", "pul-" + rand(HEX, 40), "pulumi login {s}"),
    Case("openshift_token", "sha256~" + rand(URLSAFE, 43), "oc login --token {s}"),
    Case("flyio_token", "fo1_" + rand(URLSAFE, 43), "fly deploy {s}"),
    Case("heroku_key", "HRKU-AA" + rand(URLSAFE, 58), "heroku {s}"),
    Case(
        "age_secret_key",
        "AGE-SECRET-KEY-1" + rand("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58),
        "age key {s}",
    ),
    # observability
    Case("grafana_token", f"glsa_{rand(ALNUM, 32)}_{rand(HEX, 8)}", "grafana {s}"),
    Case("sentry_token", "sntryu_" + rand(HEX, 64), "sentry {s}"),
    Case("dynatrace_token", f"dt0c01.{rand(ALNUM, 24)}.{rand(ALNUM, 64)}", "dynatrace {s}"),
    # personal data: made up, but valid by the rules the checks apply (check digit, Luhn, …)
    Case("email", "alice.wang@example.com", "write to {s} about the report"),
    Case("cn_resident_id", "11010519491231002X", "身份证号 {s}，请核对"),
    Case("card_number", "4111 1111 1111 1111", "card {s} exp 12/29"),
    Case("us_ssn", "536-90-4399", "SSN {s} on file"),
    Case("us_ssn_stated", "536904399", "my social security number is {s} ok"),
    Case("phone_cn", "13812345678", "手机 {s} 联系我"),
    Case("phone_intl", "+44 20 7946 0958", "call {s} in London"),
    Case("phone_us", "(415) 555-2671", "office {s} ext 2"),
    Case("iban", "DE89 3704 0044 0532 0130 00", "pay to {s} by Friday"),
    Case("iban_stated", "GB29NWBK60161331926819", "IBAN: {s}, thanks"),
]

BY_FORMAT = {case.format: case for case in CASES}

# The formats issue 9 lists, as the issue's own examples would paste them.
ISSUE_FORMATS = (
    "aws_secret", "password_en", "password_zh", "stripe_key", "gcp_api_key", "jwt",
    "basic_auth", "url_credentials", "private_key", "anthropic_key",
)  # fmt: skip

# The nine items of personal data issue 24 counts (e-mail, phone, resident ID, SSN, card), in
# the sentences a user would paste them in, Chinese and English.
PERSONAL: list[Case] = [
    Case("email", "alice.wang@example.com", "write to {s} about the report"),
    Case("email", "zhang.san@163.com", "请发邮件到 {s} 确认"),
    Case("phone_cn", "13812345678", "手机 {s} 联系我"),
    Case("phone_cn", "010-62345678", "办公室电话 {s}，工作日"),
    Case("phone_intl", "+1 415-555-2671", "call me at {s} tonight"),
    Case("cn_resident_id", "11010519491231002X", "身份证号 {s}，请核对"),
    Case("us_ssn", "536-90-4399", "SSN {s} on file"),
    Case("card_number", "4111111111111111", "card {s} exp 12/29"),
    Case("card_number", "6222021234567894", "银联卡号 {s} 已绑定"),
]
