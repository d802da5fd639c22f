"""Prepares a moto server started with signature checking on (INITIAL_NO_AUTH_ACTION_COUNT=3):
its three unauthenticated actions make an IAM user with every S3 right and an access key for
it; then, signed with that key, the buckets named on the command line are created. Prints the
key as JSON: {"accessKeyID": ..., "secretAccessKey": ...}.

    python setup.py ENDPOINT BUCKET [BUCKET ...]
"""
import json
import sys

import boto3

endpoint, buckets = sys.argv[1], sys.argv[2:]
iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                   aws_access_key_id="setup", aws_secret_access_key="setup")
iam.create_user(UserName="strata")
iam.put_user_policy(UserName="strata", PolicyName="s3", PolicyDocument=json.dumps({
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
}))
key = iam.create_access_key(UserName="strata")["AccessKey"]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"])
for bucket in buckets:
    s3.create_bucket(Bucket=bucket)
print(json.dumps({"accessKeyID": key["AccessKeyId"], "secretAccessKey": key["SecretAccessKey"]}))
